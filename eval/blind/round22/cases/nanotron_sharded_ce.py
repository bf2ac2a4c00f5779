# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
import torch

import nanotron.distributed as dist


class _NullCtx:
    def save_for_backward(self, *tensors):
        pass


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
        ctx.save_for_backward(exp_logits, target_mask, masked_target_1d)
        return loss.view_as(target)


def sharded_cross_entropy(sharded_logits, target, group: dist.ProcessGroup, dtype: torch.dtype = None):
    """Helper function for the cross entropy."""
    if dtype is not None and torch._C.is_grad_enabled():
        # Cast input to specific dtype.
        sharded_logits = sharded_logits.to(dtype=dtype)
    if torch.is_grad_enabled():
        return _ShardedCrossEntropy.apply(sharded_logits, target, group)
    return _ShardedCrossEntropy.forward(_NullCtx(), sharded_logits, target, group)
