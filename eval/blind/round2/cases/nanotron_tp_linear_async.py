# Modelled on nanotron src/nanotron/parallel/tensor_parallel/{nn.py,functional.py}
import math
from typing import Optional

import torch
from torch import nn
from torch.nn import functional as F

from nanotron import distributed as dist
from nanotron.parallel.tensor_parallel.distributed_differentiable_primitives import (
    differentiable_all_gather,
    differentiable_all_reduce_sum,
    differentiable_identity,
    differentiable_reduce_scatter_sum,
)
from nanotron.parallel.tensor_parallel.enum import TensorParallelLinearMode

_grad_on = torch.is_grad_enabled


class _ColumnLinearAsyncCommunication(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, weight, bias, group, tp_mode):
        ctx.use_bias = bias is not None
        ctx.group = group
        tensor = tensor.contiguous()
        ctx.save_for_backward(tensor, weight)
        group_size = group.size()
        current_rank = dist.get_rank(group)
        sharded_batch_size, *intermediate_size, hidden_size = tensor.shape
        gathered_batch_size = sharded_batch_size * group_size
        gathered_tensor = torch.empty(
            gathered_batch_size, *intermediate_size, hidden_size, device=tensor.device, dtype=tensor.dtype
        )
        handle = dist.all_gather_into_tensor(gathered_tensor, tensor, group=group, async_op=True)
        output_size = weight.shape[0]
        gathered_output = torch.empty(
            gathered_batch_size, *intermediate_size, output_size, device=tensor.device, dtype=tensor.dtype
        )
        before_shard, same_device_shard, after_shard = torch.split(
            gathered_output,
            split_size_or_sections=[
                sharded_batch_size * current_rank,
                sharded_batch_size,
                sharded_batch_size * (group_size - current_rank - 1),
            ],
            dim=0,
        )
        first_dims = math.prod([sharded_batch_size, *intermediate_size])
        torch.mm(tensor.view(first_dims, hidden_size), weight.t(), out=same_device_shard.view(first_dims, output_size))
        handle.wait()
        before_tensor, _, after_tensor = torch.split(
            gathered_tensor,
            [sharded_batch_size * current_rank, sharded_batch_size, sharded_batch_size * (group_size - current_rank - 1)],
            dim=0,
        )
        torch.matmul(before_tensor, weight.t(), out=before_shard)
        torch.matmul(after_tensor, weight.t(), out=after_shard)
        if bias is not None:
            gathered_output += bias
        return gathered_output


class _RowLinearAsyncCommunication(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, weight, bias, group, tp_mode):
        assert tp_mode is TensorParallelLinearMode.REDUCE_SCATTER
        ctx.use_bias = bias is not None
        ctx.group = group
        out = F.linear(tensor, weight, bias)
        if group.size() > 1:
            out = differentiable_reduce_scatter_sum(out, group=group)
        ctx.save_for_backward(tensor, weight)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        # all-gather of grad_output overlapped with the grad_weight GEMM (async_op=True)
        raise NotImplementedError


def column_linear(input, weight, bias, group, tp_mode, async_communication: bool):
    if async_communication:
        return _ColumnLinearAsyncCommunication.apply(input, weight, bias, group, tp_mode)
    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        input = differentiable_identity(input, group=group)
    elif tp_mode is TensorParallelLinearMode.REDUCE_SCATTER:
        input = differentiable_all_gather(input, group=group)
    return F.linear(input, weight, bias)


def row_linear(input, weight, bias, group, tp_mode, async_communication: bool):
    if async_communication:
        return _RowLinearAsyncCommunication.apply(input, weight, bias, group, tp_mode)
    out = F.linear(input, weight, bias)
    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        if _grad_on():
            out = differentiable_all_reduce_sum(out, group=group)
        else:
            dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
    elif tp_mode is TensorParallelLinearMode.REDUCE_SCATTER:
        out = differentiable_reduce_scatter_sum(out, group=group)
    return out


class TensorParallelColumnLinear(nn.Linear):
    def __init__(self, in_features, out_features, pg, mode, bias=True, device=None, dtype=None,
                 async_communication: bool = False):
        self.pg = pg
        self.world_size = pg.size()
        super().__init__(in_features, out_features // self.world_size, bias=bias, device=device, dtype=dtype)
        self.mode = mode
        self.async_communication = async_communication

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return column_linear(
            input=x,
            weight=self.weight,
            bias=self.bias,
            group=self.pg,
            tp_mode=self.mode,
            async_communication=self.async_communication and torch.is_grad_enabled(),
        )


class TensorParallelRowLinear(nn.Linear):
    def __init__(self, in_features, out_features, pg, mode, bias=True, device=None, dtype=None,
                 async_communication: bool = False):
        self.pg = pg
        self.world_size = pg.size()
        bias = dist.get_rank(self.pg) == 0 and bias
        super().__init__(in_features // self.world_size, out_features, bias=bias, device=device, dtype=dtype)
        self.mode = mode
        self.async_communication = async_communication
        if self.mode is TensorParallelLinearMode.ALL_REDUCE and self.async_communication:
            raise ValueError("async_communication is not supported for ALL_REDUCE mode")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return row_linear(
            input=x,
            weight=self.weight,
            bias=self.bias,
            group=self.pg,
            tp_mode=self.mode,
            async_communication=self.async_communication and _grad_on(),
        )
