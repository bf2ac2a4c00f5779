# Adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py (unshard, pre_forward)
import torch
import torch.distributed as dist
from torch.autograd.graph import register_multi_grad_hook

from .context import build_context


def unshard(group_state, ctx):
    for p in group_state.params:
        full = torch.empty(p.full_numel, dtype=p.dtype, device=p.device)
        work = dist.all_gather_into_tensor(full, p.shard, group=group_state.pg, async_op=ctx.grad_enabled)
        group_state.pending.append((p, full, work))


def wait_for_unshard(group_state):
    for p, full, work in group_state.pending:
        if work is not None:
            work.wait()
        p.unsharded = full
    group_state.pending.clear()


def pre_forward(group_state, module, args):
    ctx = build_context(group_state)
    unshard(group_state, ctx)
    wait_for_unshard(group_state)
    if ctx.grad_enabled:
        tensors = [a for a in args if torch.is_tensor(a) and a.requires_grad]
        if tensors:
            register_multi_grad_hook(tensors, lambda grads: None)
    return args
