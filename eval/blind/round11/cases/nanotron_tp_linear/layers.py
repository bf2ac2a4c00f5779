# Adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/nn.py
# (TensorParallelColumnLinear.forward, TensorParallelRowLinear.forward).
import torch
import torch.distributed as dist

from nanotron.parallel.tensor_parallel.enum import TensorParallelLinearMode

from .base import _TensorParallelLinearBase
from .functional import column_linear, row_linear


class TensorParallelColumnLinear(_TensorParallelLinearBase):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = column_linear(
            input=x,
            weight=self.weight,
            bias=self.bias,
            group=self.pg,
            tp_mode=self.mode,
            async_communication=self.use_async_communication(),
        )
        if not self.grad_enabled:
            out = out.detach()
        return out


class TensorParallelRowLinear(_TensorParallelLinearBase):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        match (self.grad_enabled, self.mode):
            case (True, TensorParallelLinearMode.REDUCE_SCATTER):
                return row_linear(x, self.weight, self.bias, self.pg, self.mode, overlap=False)
            case (_, TensorParallelLinearMode.REDUCE_SCATTER):
                out = torch.nn.functional.linear(x, self.weight, self.bias)
                dist.all_reduce(out, group=self.pg)
                rank = dist.get_rank(self.pg)
                return out.chunk(dist.get_world_size(self.pg), dim=0)[rank].contiguous()
            case _:
                return row_linear(x, self.weight, self.bias, self.pg, self.mode)
