import torch
import torch.distributed as dist


def reduce(x, use_async, pg):
    pg = pg or dist.group.WORLD
    use_async = use_async if torch.is_grad_enabled() else False
    return dist.all_reduce(x, group=pg, async_op=use_async)
