"""Tensor-parallel collectives used by the Linear forward (cf. transformer_engine/pytorch/distributed.py)."""
from typing import Optional, Tuple

import torch
import torch.distributed as dist


def get_distributed_world_size(group: Optional[dist.ProcessGroup] = None) -> int:
    if not dist.is_initialized():
        return 1
    return dist.get_world_size(group=group)


def allreduce(inp: torch.Tensor, tp_group, async_op: bool = False) -> Tuple[torch.Tensor, Optional[dist.Work]]:
    if get_distributed_world_size(tp_group) == 1:
        return inp, None
    handle = dist.all_reduce(inp, group=tp_group, async_op=async_op)
    return inp, handle


def symmetric_all_reduce(inp: torch.Tensor, tp_group, all_reduce_type: str = "multimem_all_reduce"):
    """All-reduce through a symmetric-memory buffer (one-shot / two-shot / multimem)."""
    import torch.distributed._symmetric_memory as symm_mem

    if get_distributed_world_size(tp_group) == 1:
        return inp, None
    msg = symm_mem.empty(inp.shape, dtype=inp.dtype, device=inp.device)
    symm_mem.rendezvous(msg, tp_group.group_name)
    msg.copy_(inp)
    op = getattr(torch.ops.symm_mem, all_reduce_type)
    if all_reduce_type == "multimem_all_reduce_":
        op(msg, "sum", tp_group.group_name)
        out = msg
    else:
        out = op(msg, "sum", tp_group.group_name)
    return out.view_as(inp), None


def reduce_scatter_along_first_dim(inp: torch.Tensor, tp_group, async_op: bool = False):
    world_size = get_distributed_world_size(tp_group)
    if world_size == 1:
        return inp, None
    dim_size = list(inp.size())
    assert dim_size[0] % world_size == 0
    dim_size[0] = dim_size[0] // world_size
    output = torch.empty(dim_size, dtype=inp.dtype, device=inp.device)
    handle = dist.reduce_scatter_tensor(output, inp.contiguous(), group=tp_group, async_op=async_op)
    return output, handle


def gather_along_first_dim(inp: torch.Tensor, tp_group, async_op: bool = False):
    world_size = get_distributed_world_size(tp_group)
    if world_size == 1:
        return inp, None
    dim_size = list(inp.size())
    dim_size[0] = dim_size[0] * world_size
    output = torch.empty(dim_size, dtype=inp.dtype, device=inp.device)
    handle = dist.all_gather_into_tensor(output, inp.contiguous(), group=tp_group, async_op=async_op)
    return output, handle
