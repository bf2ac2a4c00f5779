# Modeled on nanotron src/nanotron/parallel/tensor_parallel/nn.py and functional.py
# (TensorParallelColumnLinear / TensorParallelRowLinear, column_linear).
from enum import Enum, auto

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


class TensorParallelLinearMode(Enum):
    ALL_REDUCE = auto()
    REDUCE_SCATTER = auto()


class DifferentiableAllReduceSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, group):
        if dist.get_world_size(group) == 1:
            return tensor
        tensor = tensor.clone()
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
        return tensor

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None


def _raw_all_reduce_sum(tensor, group):
    if dist.get_world_size(group) == 1:
        return tensor
    tensor = tensor.clone()
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    return tensor


def column_linear(input, weight, bias, group, tp_mode, async_communication, tp_recompute_allgather=True):
    if async_communication:
        from nanotron.parallel.tensor_parallel.functional import _ColumnLinearAsyncCommunication
        return _ColumnLinearAsyncCommunication.apply(input, weight, bias, group, tp_mode, tp_recompute_allgather)
    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        return F.linear(input, weight, bias)
    from nanotron.parallel.tensor_parallel.functional import _ColumnLinearNoAsyncCommunicationReduceScatterMode
    return _ColumnLinearNoAsyncCommunicationReduceScatterMode.apply(input, weight, bias, group, tp_recompute_allgather)


class TensorParallelColumnLinear(nn.Linear):
    def __init__(self, in_features, out_features, pg, mode, bias=True, async_communication=False,
                 tp_recompute_allgather=True):
        self.pg = pg
        self.world_size = dist.get_world_size(pg)
        super().__init__(in_features, out_features // self.world_size, bias=bias)
        self.mode = mode
        self.async_communication = async_communication
        self.tp_recompute_allgather = tp_recompute_allgather

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return column_linear(
            input=x,
            weight=self.weight,
            bias=self.bias,
            group=self.pg,
            tp_mode=self.mode,
            async_communication=self.async_communication and torch.is_grad_enabled(),
            tp_recompute_allgather=self.tp_recompute_allgather,
        )


class TensorParallelRowLinear(nn.Linear):
    def __init__(self, in_features, out_features, pg, mode, bias=True):
        self.pg = pg
        self.world_size = dist.get_world_size(pg)
        super().__init__(in_features // self.world_size, out_features, bias=bias)
        self.mode = mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.linear(x, self.weight)
        # Same all-reduce either way; the Function only adds a backward rule.
        reduce_fn = DifferentiableAllReduceSum.apply if torch.is_grad_enabled() else _raw_all_reduce_sum
        out = reduce_fn(out, self.pg)
        if self.bias is not None:
            out = out + self.bias
        return out
