# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
from typing import Optional

import torch
from torch.nn import functional as F

import nanotron.distributed as dist
from nanotron.parallel.tensor_parallel.distributed_differentiable_primitives import (
    differentiable_all_gather,
    differentiable_identity,
)
from nanotron.parallel.tensor_parallel.enum import TensorParallelLinearMode

grad_on = torch.is_grad_enabled


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
        gathered_tensor = torch.empty(
            gathered_batch_size, *intermediate_size, hidden_size,
            device=tensor.device, dtype=tensor.dtype, requires_grad=False,
        )
        handle = dist.all_gather_into_tensor(gathered_tensor, tensor, group=group, async_op=True)
        # overlap the local shard matmul with the all-gather
        same_device_out = F.linear(tensor, weight, bias)
        handle.wait()
        if tp_recompute_allgather:
            ctx.save_for_backward(tensor, weight)
        else:
            ctx.save_for_backward(gathered_tensor, weight)
        return F.linear(gathered_tensor, weight, bias), same_device_out


def column_linear(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor],
    group: dist.ProcessGroup,
    tp_mode: TensorParallelLinearMode,
    async_communication: bool,
    tp_recompute_allgather: bool = True,
):
    async_communication = async_communication and grad_on()
    tp_recompute_allgather = tp_recompute_allgather and grad_on()
    if async_communication:
        return _ColumnLinearAsyncCommunication.apply(input, weight, bias, group, tp_mode, tp_recompute_allgather)[0]

    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        input = differentiable_identity(input, group=group)
    elif tp_mode is TensorParallelLinearMode.REDUCE_SCATTER:
        input = differentiable_all_gather(input, group=group)
    else:
        raise ValueError(f"Got unexpected mode: {tp_mode}.")
    return F.linear(input, weight, bias)
