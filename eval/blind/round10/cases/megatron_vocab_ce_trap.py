# Adapted from NVIDIA/Megatron-LM megatron/core/tensor_parallel/cross_entropy.py (_VocabParallelCrossEntropy)
import torch
import torch.distributed as dist


def vocab_parallel_cross_entropy_fwd(ctx, vocab_parallel_logits, target, group):
    logits_max = torch.max(vocab_parallel_logits, dim=-1)[0]
    dist.all_reduce(logits_max, op=dist.ReduceOp.MAX, group=group)
    vocab_parallel_logits = vocab_parallel_logits - logits_max.unsqueeze(-1)
    part = vocab_parallel_logits.shape[-1]
    start = dist.get_rank(group) * part
    target_mask = (target < start) | (target >= start + part)
    masked_target = (target - start).masked_fill(target_mask, 0)
    logits_2d = vocab_parallel_logits.view(-1, part)
    predicted = logits_2d[torch.arange(logits_2d.shape[0]), masked_target.view(-1)].view_as(target)
    predicted = predicted.masked_fill(target_mask, 0.0)
    dist.all_reduce(predicted, group=group)
    exp_logits = vocab_parallel_logits.exp()
    sum_exp = exp_logits.sum(dim=-1)
    dist.all_reduce(sum_exp, group=group)
    loss = torch.log(sum_exp) - predicted
    keep_for_bwd = ctx is not None and torch.is_grad_enabled()
    if keep_for_bwd:
        exp_logits.div_(sum_exp.unsqueeze(-1))
        ctx.save_for_backward(exp_logits, target_mask, masked_target)
    return loss
