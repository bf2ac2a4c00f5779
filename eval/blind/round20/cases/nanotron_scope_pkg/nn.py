# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
import torch
from torch import nn

import nanotron.distributed as dist
from nanotron.parallel.tensor_parallel.enum import TensorParallelLinearMode

from ._ctx import tp_forward_scope
from .functional import column_linear, sharded_cross_entropy


class TensorParallelColumnLinear(nn.Linear):
    def __init__(self, in_features, out_features, pg: dist.ProcessGroup, mode: TensorParallelLinearMode,
                 bias=True, device=None, dtype=None):
        self.pg = pg
        self.world_size = pg.size()
        self.in_features = in_features
        self.out_features = out_features // self.world_size
        super().__init__(in_features=self.in_features, out_features=self.out_features, bias=bias,
                         device=device, dtype=dtype)
        self.mode = mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with tp_forward_scope():
            return column_linear(input=x, weight=self.weight, bias=self.bias, group=self.pg, tp_mode=self.mode)


class TensorParallelLMLoss(nn.Module):
    def __init__(self, pg: dist.ProcessGroup):
        super().__init__()
        self.pg = pg

    def forward(self, sharded_logits: torch.Tensor, label_ids: torch.Tensor) -> torch.Tensor:
        with tp_forward_scope():
            return sharded_cross_entropy(sharded_logits, label_ids.transpose(0, 1).contiguous(),
                                         group=self.pg, dtype=torch.float).transpose(0, 1)
