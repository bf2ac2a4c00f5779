# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
from typing import Optional

import torch
from torch.nn import functional as F

import nanotron.distributed as dist
from nanotron.parallel.tensor_parallel.enum import TensorParallelLinearMode

from ._ctx import tp_grad_enabled


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

        exp_logits = sharded_logits
        torch.exp(sharded_logits, out=exp_logits)
        sum_exp_logits = exp_logits.sum(dim=-1)
        dist.all_reduce(sum_exp_logits, op=dist.ReduceOp.SUM, group=group)
        loss = torch.log(sum_exp_logits) - predicted_logits
        exp_logits.div_(sum_exp_logits.unsqueeze(dim=-1))

        # Store softmax, target-mask and masked-target for backward pass.
        if tp_grad_enabled():
            ctx.save_for_backward(exp_logits, target_mask, masked_target_1d)
        return loss.view_as(target)


def _use_async_all_gather(tp_mode: TensorParallelLinearMode) -> bool:
    return tp_grad_enabled() and tp_mode is TensorParallelLinearMode.REDUCE_SCATTER


def column_linear(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                  group: dist.ProcessGroup, tp_mode: TensorParallelLinearMode):
    if tp_mode is TensorParallelLinearMode.ALL_REDUCE:
        return F.linear(input, weight, bias)
    input = input.contiguous()
    sharded_batch_size, *rest = input.shape
    gathered = torch.empty(sharded_batch_size * group.size(), *rest, device=input.device, dtype=input.dtype)
    if _use_async_all_gather(tp_mode):
        handle = dist.all_gather_into_tensor(gathered, input, group=group, async_op=True)
        local_out = F.linear(input, weight, bias)
        handle.wait()
        rank = dist.get_rank(group)
        out = F.linear(gathered, weight, bias)
        out[rank * sharded_batch_size:(rank + 1) * sharded_batch_size] = local_out
        return out
    dist.all_gather_into_tensor(gathered, input, group=group)
    return F.linear(gathered, weight, bias)


def sharded_cross_entropy(sharded_logits, target, group: dist.ProcessGroup, dtype: torch.dtype = None):
    if dtype is not None:
        sharded_logits = sharded_logits.to(dtype=dtype)
    return _ShardedCrossEntropy.apply(sharded_logits, target, group)
