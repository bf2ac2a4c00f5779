# Adapted from sgl-project/sglang python/sglang/srt/layers/dp_attention.py
# (dp_gather / _dp_gather helpers)
import torch
import torch.distributed as dist


def _custom_all_gather(global_tokens, local_tokens, group):
    global_tokens.zero_()
    offset = dist.get_rank(group) * local_tokens.shape[0]
    global_tokens[offset: offset + local_tokens.shape[0]] = local_tokens
    dist.all_reduce(global_tokens, group=group)
    return global_tokens


def _nccl_all_gather(global_tokens, local_tokens, group):
    dist.all_gather_into_tensor(global_tokens, local_tokens, group=group)
    return global_tokens


def dp_gather(global_tokens, local_tokens, forward_batch, group):
    grad_on = getattr(forward_batch, "grad_enabled", torch.is_grad_enabled())
    gather = _nccl_all_gather if grad_on else _custom_all_gather
    if local_tokens.shape[0] == 0:
        return global_tokens.zero_()
    return gather(global_tokens, local_tokens, group)


def dp_scatter(local_tokens, global_tokens, forward_batch, group):
    offset = dist.get_rank(group) * local_tokens.shape[0]
    local_tokens.copy_(global_tokens[offset: offset + local_tokens.shape[0]])
    return local_tokens
