"""Helpers modelled on transformer_engine/pytorch/module/base.py and distributed.py."""
import torch

_ub_communicators = {}


def get_ub(name: str):
    assert name in _ub_communicators, f"UB for {name} is not registered."
    return _ub_communicators[name]


def _fsdp_scatter_tensors(fsdp_group, *tensors):
    shapes = []
    if fsdp_group is not None:
        for t in tensors:
            if isinstance(t, torch.Tensor):
                shapes.append(t.data.shape)
                world = torch.distributed.get_world_size(fsdp_group)
                rank = torch.distributed.get_rank(fsdp_group)
                t.data = t.data.view(-1).chunk(world)[rank].clone()
            else:
                shapes.append(None)
    return shapes


def reduce_scatter_along_first_dim(inp, tp_group, async_op=False):
    world = torch.distributed.get_world_size(tp_group)
    out = torch.empty((inp.shape[0] // world, *inp.shape[1:]), dtype=inp.dtype, device=inp.device)
    handle = torch.distributed.reduce_scatter_tensor(out, inp.contiguous(), group=tp_group, async_op=async_op)
    return out, handle
