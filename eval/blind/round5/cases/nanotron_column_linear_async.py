"""Modelled on nanotron src/nanotron/parallel/tensor_parallel/functional.py
(column_linear, _ColumnLinearAsyncCommunication, ColumnLinearContextParallelNoAsync)."""
import torch
from torch.nn import functional as F

import nanotron.distributed as dist
from nanotron.parallel.tensor_parallel.distributed_differentiable_primitives import (
    differentiable_all_gather,
    differentiable_identity,
)
from nanotron.parallel.tensor_parallel.enum import TensorParallelLinearMode


class _ColumnLinearAsyncCommunication(torch.autograd.Function):
    """Overlaps the sequence all-gather with the local-shard matmul."""

    @staticmethod
    def forward(ctx, tensor, weight, bias, group, tp_mode):
        ctx.use_bias = bias is not None
        ctx.tp_mode = tp_mode
        ctx.group = group
        ctx.save_for_backward(tensor, weight)
        sharded_batch_size, *intermediate_size, hidden_size = tensor.shape
        group_size = group.size()
        rank = dist.get_rank(group)
        gathered_tensor = torch.empty(
            group_size * sharded_batch_size, *intermediate_size, hidden_size,
            device=tensor.device, dtype=tensor.dtype,
        )
        handle = dist.all_gather_into_tensor(gathered_tensor, tensor.contiguous(), group=group, async_op=True)
        same_device_shape = (sharded_batch_size * (rank + 1) - sharded_batch_size * rank, *tensor.shape[1:-1], weight.shape[0])
        out = torch.empty(group_size * sharded_batch_size, *intermediate_size, weight.shape[0],
                          device=tensor.device, dtype=tensor.dtype)
        out[sharded_batch_size * rank: sharded_batch_size * (rank + 1)] = F.linear(tensor, weight, bias)
        handle.wait()
        before = gathered_tensor[: sharded_batch_size * rank]
        after = gathered_tensor[sharded_batch_size * (rank + 1):]
        if before.numel() > 0:
            out[: sharded_batch_size * rank] = F.linear(before, weight, bias)
        if after.numel() > 0:
            out[sharded_batch_size * (rank + 1):] = F.linear(after, weight, bias)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError


class _ColumnLinearNoAsyncCommunicationReduceScatterMode(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, weight, bias, group):
        ctx.group = group
        ctx.save_for_backward(tensor, weight)
        gathered = differentiable_all_gather(tensor, group=group)
        return F.linear(gathered, weight, bias)

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError


def column_linear(input, weight, bias, group, tp_mode, async_communication: bool, tp_recompute_allgather: bool = True):
    if async_communication and torch.is_grad_enabled():
        return _ColumnLinearAsyncCommunication.apply(input, weight, bias, group, tp_mode)

    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        input = differentiable_identity(input, group=group)
        return F.linear(input, weight, bias)
    if tp_mode is TensorParallelLinearMode.REDUCE_SCATTER:
        if torch.is_grad_enabled():
            return _ColumnLinearNoAsyncCommunicationReduceScatterMode.apply(input, weight, bias, group)
        gathered = differentiable_all_gather(input, group=group)
        return F.linear(gathered, weight, bias)
    raise ValueError(f"Got unexpected mode: {tp_mode}.")
