from typing import Optional, Tuple

import torch
import torch.distributed as dist


def get_distributed_world_size(group: Optional[dist.ProcessGroup] = None) -> int:
    if not dist.is_initialized():
        return 1
    return dist.get_world_size(group=group)


def reduce_scatter_along_first_dim(
    inp: torch.Tensor, tp_group: dist.ProcessGroup, async_op: bool = False
) -> Tuple[torch.Tensor, Optional[dist.Work]]:
    world_size = get_distributed_world_size(tp_group)
    if world_size == 1:
        return inp, None
    dim_size = list(inp.size())
    assert dim_size[0] % world_size == 0
    dim_size[0] = dim_size[0] // world_size
    output = torch.empty(dim_size, dtype=inp.dtype, device=torch.cuda.current_device())
    handle = dist.reduce_scatter_tensor(output, inp.contiguous(), group=tp_group, async_op=async_op)
    return output, handle


def allreduce(
    inp: torch.Tensor, tp_group: Optional[dist.ProcessGroup] = None, async_op: bool = False
) -> Tuple[torch.Tensor, Optional[dist.Work]]:
    if get_distributed_world_size(tp_group) == 1:
        return inp, None
    handle = dist.all_reduce(inp, group=tp_group, async_op=async_op)
    return inp, handle
