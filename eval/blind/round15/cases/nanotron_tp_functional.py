# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
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

try:
    _grad_enabled = torch._C.is_grad_enabled
except AttributeError:  # pragma: no cover
    _grad_enabled = torch.is_grad_enabled


def _sharded_cross_entropy_fwd(sharded_logits, target, group):
    logits_max = torch.max(sharded_logits, dim=-1)[0]
    dist.all_reduce(logits_max, op=dist.ReduceOp.MAX, group=group)
    sharded_logits = sharded_logits - logits_max.unsqueeze(dim=-1)

    sharded_hidden_size = sharded_logits.shape[-1]
    rank = dist.get_rank(group)
    start_index = rank * sharded_hidden_size
    end_index = start_index + sharded_hidden_size

    target_mask = (target < start_index) | (target >= end_index)
    masked_target = target.clone() - start_index
    masked_target[target_mask] = 0

    logits_2d = sharded_logits.view(-1, sharded_hidden_size)
    masked_target_1d = masked_target.view(-1)
    arange_1d = torch.arange(start=0, end=logits_2d.shape[0], device=logits_2d.device)
    predicted_logits_1d = logits_2d[arange_1d, masked_target_1d].contiguous()
    predicted_logits = predicted_logits_1d.view_as(target)
    predicted_logits[target_mask] = 0.0
    dist.all_reduce(predicted_logits, op=dist.ReduceOp.SUM, group=group)

    exp_logits = sharded_logits
    torch.exp(sharded_logits, out=exp_logits)
    sum_exp_logits = exp_logits.sum(dim=-1)
    dist.all_reduce(sum_exp_logits, op=dist.ReduceOp.SUM, group=group)

    loss = torch.log(sum_exp_logits) - predicted_logits
    exp_logits.div_(sum_exp_logits.unsqueeze(dim=-1))
    return loss.view_as(target), exp_logits, target_mask, masked_target_1d


class _ShardedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, sharded_logits, target, group: dist.ProcessGroup):
        loss, softmax, target_mask, masked_target_1d = _sharded_cross_entropy_fwd(sharded_logits, target, group)
        ctx.save_for_backward(softmax, target_mask, masked_target_1d)
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        softmax, target_mask, masked_target_1d = ctx.saved_tensors
        grad_input = softmax
        sharded_hidden_size = softmax.size()[-1]
        grad_2d = grad_input.view(-1, sharded_hidden_size)
        arange_1d = torch.arange(start=0, end=grad_2d.size()[0], device=grad_2d.device)
        grad_2d[arange_1d, masked_target_1d] -= 1.0 - target_mask.view(-1).float()
        grad_input.mul_(grad_output.unsqueeze(dim=-1))
        return grad_input, None, None


def sharded_cross_entropy(sharded_logits, target, group: dist.ProcessGroup, dtype: torch.dtype = None):
    """Helper function for the cross entropy."""
    if dtype is not None:
        sharded_logits = sharded_logits.to(dtype=dtype)
    if _grad_enabled():
        return _ShardedCrossEntropy.apply(sharded_logits, target, group)
    return _sharded_cross_entropy_fwd(sharded_logits, target, group)[0]


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
        torch.mm(
            input=tensor.view(first_dims, hidden_size),
            mat2=weight.t(),
            out=same_device_shard.view(first_dims, output_size),
        )
        handle.wait()
        ctx.save_for_backward(tensor if tp_recompute_allgather else gathered_tensor, weight)
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
                input=gathered_tensor[sharded_batch_size * (current_rank + 1) :].view(first_dims, hidden_size),
                mat2=weight.t(),
                out=after_shard.view(first_dims, output_size),
            )
        if bias is not None:
            gathered_output.add_(bias)
        return gathered_output

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError


class _ColumnLinearNoAsyncCommunicationReduceScatterMode(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, group, tp_recompute_allgather=True):
        if group.size() == 1:
            total_input = input
        else:
            unsharded_batch_size = input.shape[0] * group.size()
            total_input = torch.empty(
                unsharded_batch_size, *input.shape[1:], device=input.device, dtype=input.dtype
            )
            dist.all_gather_into_tensor(total_input, input.contiguous(), group=group)
        ctx.group = group
        ctx.tp_recompute_allgather = tp_recompute_allgather
        ctx.input_size = input.shape
        ctx.save_for_backward(input if tp_recompute_allgather else total_input, weight, bias)
        return F.linear(total_input, weight, bias)

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError


def column_linear(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor],
    group: dist.ProcessGroup,
    tp_mode: TensorParallelLinearMode,
    async_communication: bool,
    tp_recompute_allgather: bool = True,
):
    if async_communication and _grad_enabled():
        return _ColumnLinearAsyncCommunication.apply(input, weight, bias, group, tp_mode, tp_recompute_allgather)

    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        input = differentiable_identity(input, group=group)
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
    out = F.linear(input, weight, bias)
    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        out = differentiable_all_reduce_sum(out, group=group)
    elif tp_mode is TensorParallelLinearMode.REDUCE_SCATTER:
        out = differentiable_reduce_scatter_sum(out, group=group)
    else:
        raise ValueError(f"Got unexpected mode: {tp_mode}.")
    return out
