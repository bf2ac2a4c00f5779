# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
import functools
import math
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


class _ColumnLinearAsyncCommunication(torch.autograd.Function):
    """Adapted from https://github.com/NVIDIA/Megatron-LM/blob/e6d7e09845590d0a36bc7f29eb28db974fb8da4e/megatron/core/tensor_parallel/layers.py#L215"""

    @staticmethod
    def forward(ctx, tensor, weight, bias, group, tp_mode, tp_recompute_allgather):
        ctx.use_bias = bias is not None
        ctx.tp_mode = tp_mode
        ctx.group = group
        ctx.tp_recompute_allgather = tp_recompute_allgather
        ctx.tensor_shape = tensor.size()

        if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
            ctx.save_for_backward(tensor, weight)
            return F.linear(tensor, weight, bias)
        elif tp_mode is TensorParallelLinearMode.REDUCE_SCATTER:
            group_size = group.size()
            current_rank = dist.get_rank(group)
            if group_size == 1:
                ctx.save_for_backward(tensor, weight)
                return F.linear(tensor, weight, bias)
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

            # Compute a shard of column_linear in the same time of AllGather
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
            if bias is None:
                torch.mm(input=tensor.view(first_dims, hidden_size), mat2=weight.t(),
                         out=same_device_shard.view(first_dims, output_size))
            else:
                torch.addmm(input=bias[None, :], mat1=tensor.view(first_dims, hidden_size), mat2=weight.t(),
                            out=same_device_shard.view(first_dims, output_size))

            # Wait communication
            handle.wait()
            if tp_recompute_allgather:
                ctx.save_for_backward(tensor, weight)
            else:
                ctx.save_for_backward(gathered_tensor, weight)

            if before_shard.numel() > 0:
                first_dims = math.prod(before_shard.shape[:-1])
                before_shard.view(first_dims, output_size).copy_(
                    F.linear(gathered_tensor[: sharded_batch_size * current_rank].view(first_dims, hidden_size),
                             weight, bias)
                )
            if after_shard.numel() > 0:
                first_dims = math.prod(after_shard.shape[:-1])
                after_shard.view(first_dims, output_size).copy_(
                    F.linear(gathered_tensor[sharded_batch_size * (current_rank + 1):].view(first_dims, hidden_size),
                             weight, bias)
                )
            return gathered_output
        else:
            raise ValueError(f"Got unexpected mode: {tp_mode}.")


class _ColumnLinearNoAsyncCommunicationReduceScatterMode(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, group, tp_recompute_allgather):
        sharded_batch_size, *rest_size = input.shape
        unsharded_batch_size = sharded_batch_size * group.size()
        if group.size() == 1:
            total_input = input.contiguous()
        elif tp_recompute_allgather:
            total_input = MemoryBuffer().get("allgather", (unsharded_batch_size, *rest_size), dtype=input.dtype)
            dist.all_gather_into_tensor(total_input, input.contiguous(), group=group)
        else:
            total_input = torch.empty(unsharded_batch_size, *rest_size, dtype=input.dtype, device=input.device)
            dist.all_gather_into_tensor(total_input, input.contiguous(), group=group)

        ctx.group = group
        ctx.tp_recompute_allgather = tp_recompute_allgather
        ctx.input_size = input.shape
        if tp_recompute_allgather:
            ctx.save_for_backward(input, weight, bias)
        else:
            ctx.save_for_backward(total_input, weight, bias)
        return F.linear(total_input, weight, bias)


def column_linear(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor],
    group: dist.ProcessGroup,
    tp_mode: TensorParallelLinearMode,
    async_communication: bool,
    tp_recompute_allgather: bool = True,
    grad_enabled: bool = True,
):
    if async_communication and grad_enabled:
        return _ColumnLinearAsyncCommunication.apply(input, weight, bias, group, tp_mode, tp_recompute_allgather)

    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        input = differentiable_identity(input, group=group) if torch.is_grad_enabled() else input
        return F.linear(input, weight, bias)
    if tp_mode is TensorParallelLinearMode.REDUCE_SCATTER:
        return _ColumnLinearNoAsyncCommunicationReduceScatterMode.apply(
            input, weight, bias, group, tp_recompute_allgather
        )
    raise ValueError(f"Got unexpected mode: {tp_mode}.")


def row_linear(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor],
    group: dist.ProcessGroup,
    tp_mode: TensorParallelLinearMode,
    async_communication: bool,
):
    if async_communication:
        raise NotImplementedError("async communication in row linear is not supported")
    out = F.linear(input, weight, bias)
    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        out = differentiable_all_reduce_sum(out, group=group)
    elif tp_mode is TensorParallelLinearMode.REDUCE_SCATTER:
        out = differentiable_reduce_scatter_sum(out, group=group)
    else:
        raise ValueError(f"Got unexpected mode: {tp_mode}.")
    return out


class TensorParallelColumnLinear(torch.nn.Linear):
    def __init__(self, in_features, out_features, pg: dist.ProcessGroup, mode: TensorParallelLinearMode,
                 bias=True, device=None, dtype=None, async_communication: bool = False,
                 tp_recompute_allgather: bool = True):
        self.pg = pg
        self.world_size = pg.size()
        assert out_features % self.world_size == 0
        self.in_features = in_features
        self.out_features = out_features // self.world_size
        self.tp_recompute_allgather = tp_recompute_allgather
        super().__init__(in_features=self.in_features, out_features=self.out_features, bias=bias,
                         device=device, dtype=dtype)
        self.mode = mode
        self.async_communication = async_communication

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fwd = functools.partial(
            column_linear,
            group=self.pg,
            tp_mode=self.mode,
            async_communication=self.async_communication,
            tp_recompute_allgather=self.tp_recompute_allgather,
            grad_enabled=torch.is_grad_enabled(),
        )
        return fwd(input=x, weight=self.weight, bias=self.bias)
