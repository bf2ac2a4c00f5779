from typing import NamedTuple, Optional

import torch

from fbgemm_gpu.split_embedding_configs import SparseType
from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode
import fbgemm_gpu.split_embedding_codegen_lookup_invokers as invokers


class CommonArgs(NamedTuple):
    placeholder_autograd_tensor: torch.Tensor
    dev_weights: torch.Tensor
    weights_offsets: torch.Tensor
    indices: torch.Tensor
    offsets: torch.Tensor
    pooling_mode: int
    output_dtype: int
    is_experimental: bool


class OptimizerArgs(NamedTuple):
    learning_rate: float
    eps: float
    momentum1: Optional[torch.Tensor]


class SplitTableBatchedEmbeddingBags(torch.nn.Module):

    def __init__(self, dev_weights, weights_offsets, pooling_mode=PoolingMode.SUM,
                 output_dtype=SparseType.FP32, learning_rate=0.01, eps=1e-8):
        super().__init__()
        self.dev_weights = dev_weights
        self.weights_offsets = weights_offsets
        self.pooling_mode = pooling_mode
        self.output_dtype = output_dtype.as_int()
        self.learning_rate = learning_rate
        self.eps = eps
        self.register_buffer("momentum1_dev", torch.zeros_like(dev_weights, dtype=torch.float32))
        self.placeholder_autograd_tensor = torch.nn.Parameter(torch.zeros(0, dtype=torch.float))
        self.timestep = 0

    def _common_args(self, indices, offsets):
        training = torch.is_grad_enabled()
        return CommonArgs(
            placeholder_autograd_tensor=self.placeholder_autograd_tensor,
            dev_weights=self.dev_weights,
            weights_offsets=self.weights_offsets,
            indices=indices,
            offsets=offsets,
            pooling_mode=self.pooling_mode,
            output_dtype=self.output_dtype if training else SparseType.FP16.as_int(),
            is_experimental=False,
        )

    def _optimizer_args(self):
        return OptimizerArgs(
            learning_rate=self.learning_rate,
            eps=self.eps,
            momentum1=self.momentum1_dev if torch.is_grad_enabled() else None,
        )

    def forward(self, indices, offsets):
        self.timestep += 1
        common_args = self._common_args(indices.long(), offsets.long())
        optimizer_args = self._optimizer_args()
        return invokers.lookup_rowwise_adagrad.invoke(common_args, optimizer_args, optimizer_args.momentum1)
