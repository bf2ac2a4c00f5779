# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
from typing import Optional

import torch
from torch.nn import functional as F

import nanotron.distributed as dist
from nanotron.parallel.tensor_parallel.distributed_differentiable_primitives import (
    differentiable_all_reduce_sum,
    differentiable_identity,
    differentiable_reduce_scatter_sum,
)
from nanotron.parallel.tensor_parallel.enum import TensorParallelLinearMode
from nanotron.parallel.utils import MemoryBuffer


def sharded_cross_entropy(
    sharded_logits,
    target,
    group: dist.ProcessGroup,
    dtype: torch.dtype = None,
    z_loss_coef: float = 0.0,
):
    """Helper function for the cross entropy."""
    dtype = dtype if torch.is_grad_enabled() else None
    if dtype is not None:
        # Cast input to specific dtype.
        sharded_logits = sharded_logits.to(dtype=dtype)
    if z_loss_coef > 0.0:
        return _ShardedCrossEntropyWithZLoss.apply(sharded_logits, target, group, z_loss_coef)
    else:
        return _ShardedCrossEntropy.apply(sharded_logits, target, group)


class _ColumnLinearAsyncCommunication(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, weight, bias, group, tp_mode, tp_recompute_allgather):
        ctx.use_bias = bias is not None
        ctx.tp_mode = tp_mode
        ctx.group = group
        ctx.tp_recompute_allgather = tp_recompute_allgather
        tensor = tensor.contiguous()
        sharded_batch_size, *intermediate_size, hidden_size = tensor.shape
        gathered_batch_size = sharded_batch_size * group.size()
        if tp_recompute_allgather:
            gathered_tensor = MemoryBuffer().get(
                "allgather", (gathered_batch_size, *intermediate_size, hidden_size), dtype=tensor.dtype
            )
        else:
            gathered_tensor = torch.empty(
                gathered_batch_size, *intermediate_size, hidden_size,
                device=tensor.device, dtype=tensor.dtype, requires_grad=False,
            )
        handle = dist.all_gather_into_tensor(gathered_tensor, tensor, group=group, async_op=True)
        handle.wait()
        ctx.save_for_backward(tensor if tp_recompute_allgather else gathered_tensor, weight)
        return F.linear(gathered_tensor, weight, bias)


def column_linear(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor],
    group: dist.ProcessGroup,
    tp_mode: TensorParallelLinearMode,
    async_communication: bool,
    tp_recompute_allgather: bool = True,
):
    async_communication = async_communication and torch.is_grad_enabled()
    tp_recompute_allgather = tp_recompute_allgather and input.requires_grad
    if async_communication:
        return _ColumnLinearAsyncCommunication.apply(input, weight, bias, group, tp_mode, tp_recompute_allgather)

    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        input = differentiable_identity(input, group=group)
    elif tp_mode is TensorParallelLinearMode.REDUCE_SCATTER:
        input = differentiable_all_gather(input, group=group)
    else:
        raise ValueError(f"Got unexpected mode: {tp_mode}.")

    return F.linear(input, weight, bias)


def row_linear(input, weight, bias, group, tp_mode):
    out = F.linear(input, weight, bias)
    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        out = differentiable_all_reduce_sum(out, group=group)
    elif tp_mode is TensorParallelLinearMode.REDUCE_SCATTER:
        out = differentiable_reduce_scatter_sum(out, group=group)
    return out
