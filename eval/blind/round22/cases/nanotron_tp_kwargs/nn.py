# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
import torch
from torch import nn

import nanotron.distributed as dist
from nanotron.parallel.tensor_parallel.enum import TensorParallelLinearMode

from .functional import column_linear


class TensorParallelColumnLinear(nn.Linear):
    def __init__(self, in_features, out_features, pg: dist.ProcessGroup, mode: TensorParallelLinearMode,
                 bias=True, device=None, dtype=None, async_communication: bool = False,
                 tp_recompute_allgather: bool = True):
        self.pg = pg
        self.world_size = pg.size()
        self.in_features = in_features
        self.out_features = out_features // self.world_size
        super().__init__(self.in_features, self.out_features, bias=bias, device=device, dtype=dtype)
        self.mode = mode
        self.async_communication = async_communication
        self.tp_recompute_allgather = tp_recompute_allgather

    def _linear_kwargs(self):
        return {
            "group": self.pg,
            "tp_mode": self.mode,
            "async_communication": self.async_communication,
            "tp_recompute_allgather": self.tp_recompute_allgather,
            "grad_enabled": torch.is_grad_enabled(),
        }

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return column_linear(input=x, weight=self.weight, bias=self.bias, **self._linear_kwargs())
