# adapted from pytorch/torchrec torchrec/distributed/embedding_lookup.py
import logging
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist
from fbgemm_gpu.split_table_batched_embeddings_ops_training import SplitTableBatchedEmbeddingBagsCodegen
from torch import nn
from torch.autograd.function import FunctionCtx

from torchrec.distributed.batched_embedding_kernel import (
    BaseBatchedEmbedding,
    BatchedDenseEmbedding,
    BatchedFusedEmbedding,
)
from torchrec.distributed.comm_ops import get_gradient_division
from torchrec.distributed.embedding_kernel import BaseEmbedding
from torchrec.distributed.embedding_types import (
    BaseEmbeddingLookup,
    EmbeddingComputeKernel,
    GroupedEmbeddingConfig,
)
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

logger: logging.Logger = logging.getLogger(__name__)


@torch.fx.wrap
def embeddings_cat_empty_rank_handle(
    embeddings: List[torch.Tensor],
    dummy_embs_tensor: torch.Tensor,
    dim: int = 0,
) -> torch.Tensor:
    if len(embeddings) == 0:
        # a hack for empty ranks
        return dummy_embs_tensor
    elif len(embeddings) == 1:
        return embeddings[0]
    else:
        return torch.cat(embeddings, dim=dim)


class CommOpGradientScaling(torch.autograd.Function):
    @staticmethod
    # pyre-ignore
    def forward(ctx: FunctionCtx, input_tensor: torch.Tensor, scale_gradient_factor: int) -> torch.Tensor:
        # pyre-ignore
        ctx.scale_gradient_factor = scale_gradient_factor
        return input_tensor

    @staticmethod
    # pyre-ignore[14]: `forward` overrides method defined in `Function` inconsistently.
    def backward(ctx: FunctionCtx, grad_output: torch.Tensor) -> Tuple[torch.Tensor, None]:
        # When gradient division is on, we scale down the gradient by world size
        # at alltoall backward for model parallelism. However weights
        # is replicated, so we scale up the gradient here.
        grad_output.mul_(ctx.scale_gradient_factor)
        return grad_output, None


class GroupedEmbeddingsLookup(BaseEmbeddingLookup[KeyedJaggedTensor, torch.Tensor]):
    """
    Lookup modules for Sequence embeddings (i.e Embeddings)
    """

    _grad_probe = staticmethod(torch.is_grad_enabled)

    def __init__(
        self,
        grouped_configs: List[GroupedEmbeddingConfig],
        pg: Optional[dist.ProcessGroup] = None,
        device: Optional[torch.device] = None,
        scale_weight_gradients: bool = True,
    ) -> None:
        super().__init__()
        self._emb_modules: nn.ModuleList = nn.ModuleList()
        self._need_prefetch: bool = False
        self._prefetched: bool = False
        for config in grouped_configs:
            self._emb_modules.append(self._create_embedding_kernel(config, pg, device))

        self._feature_splits: List[int] = []
        for config in grouped_configs:
            self._feature_splits.append(config.num_features())

        # return a dummy empty tensor when grouped_configs is empty
        self.register_buffer(
            "_dummy_embs_tensor",
            torch.empty([0], dtype=torch.float32, device=device, requires_grad=True),
        )
        self.grouped_configs = grouped_configs
        self._scale_gradient_factor = (
            dist.get_world_size(pg) if scale_weight_gradients and get_gradient_division() else 1
        )

    def _create_embedding_kernel(
        self,
        config: GroupedEmbeddingConfig,
        pg: Optional[dist.ProcessGroup],
        device: Optional[torch.device],
    ) -> BaseEmbedding:
        for table in config.embedding_tables:
            if table.compute_kernel == EmbeddingComputeKernel.FUSED_UVM_CACHING:
                self._need_prefetch = True
        if config.compute_kernel == EmbeddingComputeKernel.DENSE:
            return BatchedDenseEmbedding(config=config, pg=pg, device=device)
        elif config.compute_kernel == EmbeddingComputeKernel.FUSED:
            return BatchedFusedEmbedding(config=config, pg=pg, device=device)
        else:
            raise ValueError(f"Compute kernel not supported {config.compute_kernel}")

    def prefetch(
        self,
        sparse_features: KeyedJaggedTensor,
        forward_stream: Optional[torch.cuda.Stream] = None,
    ) -> None:
        if not self._need_prefetch:
            return
        if len(self._emb_modules) > 0:
            assert sparse_features is not None
            features_by_group = sparse_features.split(self._feature_splits)
            for emb_op, features in zip(self._emb_modules, features_by_group):
                if (
                    isinstance(emb_op.emb_module, SplitTableBatchedEmbeddingBagsCodegen)
                    and not emb_op.emb_module.prefetch_pipeline
                ):
                    logging.error(
                        f"Invalid setting on {type(emb_op.emb_module)} modules. prefetch_pipeline must be set to True.\n"
                    )
                if hasattr(emb_op.emb_module, "prefetch"):
                    emb_op.emb_module.prefetch(
                        indices=features.values(),
                        offsets=features.offsets(),
                        forward_stream=forward_stream,
                    )
        self._prefetched = True

    def forward(
        self,
        sparse_features: KeyedJaggedTensor,
    ) -> torch.Tensor:
        if self._need_prefetch and not self._prefetched and self._grad_probe():
            self.prefetch(sparse_features, forward_stream=torch.cuda.current_stream())
        self._prefetched = False

        embeddings: List[torch.Tensor] = []
        features_by_group = sparse_features.split(self._feature_splits)
        for emb_op, features in zip(self._emb_modules, features_by_group):
            embeddings.append(emb_op(features).view(-1))

        output = embeddings_cat_empty_rank_handle(embeddings, self._dummy_embs_tensor)
        if torch.is_grad_enabled():
            output = CommOpGradientScaling.apply(output, self._scale_gradient_factor)
        return output

    def state_dict(
        self,
        destination: Optional[Dict[str, Any]] = None,
        prefix: str = "",
        keep_vars: bool = False,
    ) -> Dict[str, Any]:
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        for emb_module in self._emb_modules:
            emb_module.state_dict(destination, prefix, keep_vars)
        return destination
