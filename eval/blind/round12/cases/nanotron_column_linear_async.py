# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
import math
from typing import Optional

import torch
from torch.nn import functional as F

import nanotron.distributed as dist
from nanotron.parallel.tensor_parallel.distributed_differentiable_primitives import (
    differentiable_all_gather,
    differentiable_identity,
)
from nanotron.parallel.tensor_parallel.enum import TensorParallelLinearMode


class _ColumnLinearAsyncCommunication(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, weight, bias, group, tp_mode):
        ctx.use_bias = bias is not None
        ctx.tp_mode = tp_mode
        ctx.group = group
        tensor = tensor.contiguous()
        group_size = group.size()
        current_rank = dist.get_rank(group)
        sharded_batch_size, *intermediate_size, hidden_size = tensor.shape
        gathered_batch_size = sharded_batch_size * group_size
        gathered_tensor = torch.empty(
            gathered_batch_size, *intermediate_size, hidden_size,
            device=tensor.device, dtype=tensor.dtype, requires_grad=False,
        )
        handle = dist.all_gather_into_tensor(gathered_tensor, tensor, group=group, async_op=True)

        output_size = weight.shape[0]
        gathered_output = torch.empty(
            gathered_batch_size, *intermediate_size, output_size,
            device=tensor.device, dtype=tensor.dtype, requires_grad=tensor.requires_grad,
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
        ctx.save_for_backward(gathered_tensor, weight)
        if before_shard.numel() > 0:
            torch.mm(gathered_tensor[: sharded_batch_size * current_rank].view(-1, hidden_size), weight.t(),
                     out=before_shard.view(-1, output_size))
        if after_shard.numel() > 0:
            torch.mm(gathered_tensor[sharded_batch_size * (current_rank + 1):].view(-1, hidden_size), weight.t(),
                     out=after_shard.view(-1, output_size))
        if bias is not None:
            gathered_output = gathered_output + bias
        return gathered_output


def column_linear(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor],
    group: dist.ProcessGroup,
    tp_mode: TensorParallelLinearMode,
    async_communication: bool,
):
    if async_communication and torch.is_grad_enabled():
        return _ColumnLinearAsyncCommunication.apply(input, weight, bias, group, tp_mode)

    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        input = differentiable_identity(input, group=group)
    elif tp_mode is TensorParallelLinearMode.REDUCE_SCATTER:
        input = differentiable_all_gather(input, group=group)
    else:
        raise ValueError(f"Got unexpected mode: {tp_mode}.")
    return F.linear(input, weight, bias)
