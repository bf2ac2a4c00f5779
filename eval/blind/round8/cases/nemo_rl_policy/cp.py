import torch
import torch.distributed as dist


class AllGatherSeq(torch.autograd.Function):

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, x.contiguous(), group=group)
        return torch.cat(parts, dim=1)

    @staticmethod
    def backward(ctx, grad):
        rank = dist.get_rank(ctx.group)
        return grad.chunk(dist.get_world_size(ctx.group), dim=1)[rank], None


def shard_for_cp(inputs, ctx):
    group = ctx.cp_group if ctx.needs_backward else None
    if group is None:
        return inputs, None
    rank, size = dist.get_rank(group), dist.get_world_size(group)
    sharded = {k: v.chunk(size, dim=1)[rank] if v.dim() > 1 else v for k, v in inputs.items()}
    return sharded, group


def gather_logits(logits, group, ctx):
    if group is None:
        return logits
    if ctx.needs_backward:
        return AllGatherSeq.apply(logits, group)
    parts = [torch.empty_like(logits) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, logits.contiguous(), group=group)
    return torch.cat(parts, dim=1)
