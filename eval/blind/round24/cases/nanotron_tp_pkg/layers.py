# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
import torch
from torch import nn
from torch.nn import functional as F

from nanotron.parallel.tensor_parallel.distributed_differentiable_primitives import (
    differentiable_all_reduce_sum,
    differentiable_reduce_scatter_sum,
)

from .config import TPConfig
from .functional import column_linear


class TensorParallelColumnLinear(nn.Linear):
    def __init__(self, in_features, out_features, pg, tp_config: TPConfig, bias=True, device=None, dtype=None):
        super().__init__(in_features, out_features // pg.size(), bias=bias, device=device, dtype=dtype)
        self.pg = pg
        self.tp_config = tp_config

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return column_linear(x, self.weight, self.bias, group=self.pg, tp_mode=self.tp_config.mode,
                             async_communication=self.tp_config.async_comm,
                             tp_recompute_allgather=self.tp_config.tp_recompute_allgather)


class TensorParallelRowLinear(nn.Linear):
    def __init__(self, in_features, out_features, pg, tp_config: TPConfig, bias=True, device=None, dtype=None):
        super().__init__(in_features // pg.size(), out_features, bias=bias, device=device, dtype=dtype)
        self.pg = pg
        self.tp_config = tp_config

    def _log_grad(self, grad):
        return grad

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.tp_config.async_comm and self.weight.requires_grad:
            self.weight.register_hook(self._log_grad)
        out = F.linear(x, self.weight, self.bias)
        reduce_fn = differentiable_reduce_scatter_sum if self.tp_config.async_comm else differentiable_all_reduce_sum
        return reduce_fn(out, group=self.pg)
