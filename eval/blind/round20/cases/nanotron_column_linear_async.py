# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
import math
from typing import Optional

import torch
from torch.nn import functional as F

import nanotron.distributed as dist
from nanotron.parallel.tensor_parallel.distributed_differentiable_primitives import differentiable_identity
from nanotron.parallel.tensor_parallel.enum import TensorParallelLinearMode
from nanotron.parallel.utils import MemoryBuffer


class _ColumnLinearAsyncCommunication(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, weight, bias, group, tp_mode, tp_recompute_allgather, async_communication):
        ctx.use_bias = bias is not None
        ctx.tp_mode = tp_mode
        ctx.group = group
        ctx.tp_recompute_allgather = tp_recompute_allgather
        ctx.tensor_shape = tensor.size()

        if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
            ctx.save_for_backward(tensor, weight)
            return F.linear(tensor, weight, bias)

        group_size = group.size()
        current_rank = dist.get_rank(group)
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

        if async_communication and group_size > 1:
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
            torch.mm(
                input=tensor.view(first_dims, hidden_size),
                mat2=weight.t(),
                out=same_device_shard.view(first_dims, output_size),
            )
            handle.wait()
            if before_shard.numel() > 0:
                first_dims = math.prod(before_shard.shape[:-1])
                torch.mm(
                    input=gathered_tensor[: sharded_batch_size * current_rank].view(first_dims, hidden_size),
                    mat2=weight.t(),
                    out=before_shard.view(first_dims, output_size),
                )
            if after_shard.numel() > 0:
                first_dims = math.prod(after_shard.shape[:-1])
                torch.mm(
                    input=gathered_tensor[sharded_batch_size * (current_rank + 1):].view(first_dims, hidden_size),
                    mat2=weight.t(),
                    out=after_shard.view(first_dims, output_size),
                )
            if bias is not None:
                gathered_output = gathered_output + bias
        else:
            dist.all_gather_into_tensor(gathered_tensor, tensor, group=group)
            gathered_output = F.linear(gathered_tensor, weight, bias)

        if tp_recompute_allgather:
            ctx.save_for_backward(tensor, weight)
        else:
            ctx.save_for_backward(gathered_tensor, weight)
        return gathered_output


def column_linear(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor],
    group: dist.ProcessGroup,
    tp_mode: TensorParallelLinearMode,
    async_communication: bool,
    tp_recompute_allgather: bool = True,
):
    if async_communication:
        return _ColumnLinearAsyncCommunication.apply(
            input, weight, bias, group, tp_mode,
            torch.is_grad_enabled() and tp_recompute_allgather,
            torch.is_grad_enabled(),
        )
    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        input = differentiable_identity(input, group=group)
    return F.linear(input, weight, bias)
