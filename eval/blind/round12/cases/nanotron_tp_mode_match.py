# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
from typing import Optional

import torch
from torch.nn import functional as F

import nanotron.distributed as dist
from nanotron.parallel.tensor_parallel.distributed_differentiable_primitives import (
    differentiable_all_reduce_sum,
    differentiable_reduce_scatter_sum,
)
from nanotron.parallel.tensor_parallel.enum import TensorParallelLinearMode


class _ShardedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, sharded_logits, target, group: dist.ProcessGroup):
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
        predicted_logits = logits_2d[arange_1d, masked_target_1d].clone().view_as(target)
        predicted_logits[target_mask] = 0.0
        dist.all_reduce(predicted_logits, op=dist.ReduceOp.SUM, group=group)
        exp_logits = torch.exp(sharded_logits)
        sum_exp_logits = exp_logits.sum(dim=-1)
        dist.all_reduce(sum_exp_logits, op=dist.ReduceOp.SUM, group=group)
        loss = torch.log(sum_exp_logits) - predicted_logits
        exp_logits.div_(sum_exp_logits.unsqueeze(dim=-1))
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(exp_logits, target_mask, masked_target_1d)
        return loss.view_as(target)


def row_linear(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor],
    group: dist.ProcessGroup,
    tp_mode: TensorParallelLinearMode,
    async_communication: bool,
):
    out = F.linear(input, weight, bias)
    match (tp_mode, async_communication and torch.is_grad_enabled()):
        case (TensorParallelLinearMode.ALL_REDUCE, True):
            out = differentiable_all_reduce_sum(out, group=group)
        case (TensorParallelLinearMode.ALL_REDUCE, False):
            root = dist.get_global_rank(group, 0)
            dist.reduce(out, dst=root, op=dist.ReduceOp.SUM, group=group)
            dist.broadcast(out, src=root, group=group)
        case (TensorParallelLinearMode.REDUCE_SCATTER, _):
            out = differentiable_reduce_scatter_sum(out, group=group)
        case _:
            raise ValueError(f"Got unexpected mode: {tp_mode}.")
    return out
