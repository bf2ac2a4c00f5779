# Adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/token_dispatcher.py
# (MoEAllGatherTokenDispatcher vs MoEAlltoAllTokenDispatcher)
import torch
import torch.distributed as dist

from . import state


def _alltoall_dispatch(hidden, group):
    out = torch.empty_like(hidden)
    dist.all_to_all_single(out, hidden, group=group)
    return out


def _allgather_dispatch(hidden, group):
    world = dist.get_world_size(group)
    out = torch.empty((hidden.shape[0] * world,) + hidden.shape[1:], dtype=hidden.dtype, device=hidden.device)
    dist.all_gather_into_tensor(out, hidden, group=group)
    return out


def dispatch_tokens(hidden, probs, idx, group):
    if state._GRAD_STATE["on"]:
        permuted = _alltoall_dispatch(hidden, group)
    else:
        permuted = _allgather_dispatch(hidden, group)
    return permuted, probs, idx
