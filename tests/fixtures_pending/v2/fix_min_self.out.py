import torch
import torch.distributed as dist


def reduce(x, use_async, pg):
    pg = pg or dist.group.WORLD
    return dist.all_reduce(x, group=pg, async_op=use_async)
