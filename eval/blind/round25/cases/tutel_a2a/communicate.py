# adapted from microsoft/tutel tutel/impls/communicate.py
import torch
import torch.distributed as dist

from . import state


def get_world_size(group=None):
    try:
        return dist.get_world_size(group)
    except:
        return 1


def all_to_all(input, group=None):
    output = torch.empty_like(input)
    if state._GRAD_AT_DISPATCH and get_world_size(group) > 1:
        work = dist.all_to_all_single(output, input.contiguous(), group=group, async_op=True)
        return output, work
    dist.all_to_all_single(output, input.contiguous(), group=group)
    return output, None


def a2a_ffn_overlap_forward(input, expert_fn, a2a_ffn_overlap_degree=1, use_2dh=False, group=None):
    num_split = a2a_ffn_overlap_degree if state.current_grad_mode() else 1
    splits = input.chunk(num_split, dim=1)
    outs = []
    for split in splits:
        y, work = all_to_all(split, group)
        if work is not None:
            work.wait()
        outs.append(expert_fn(y))
    return torch.cat(outs, dim=1)
