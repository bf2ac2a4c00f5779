# Adapted from pytorch/pytorch torch/distributed/fsdp/_runtime_utils.py (_pre_forward, _prefetch_handle,
# _register_post_backward_hook)
from enum import Enum, auto
import torch
import torch.distributed as dist


class _PrefetchMode(Enum):
    BACKWARD = auto()
    FORWARD = auto()
    NONE = auto()


def _prefetch_handle(state, handle, mode):
    nxt = state._exec_order.get(handle)
    if nxt is None:
        return
    dist.all_gather_into_tensor(nxt.full, nxt.shard, group=state.process_group, async_op=True)


def _register_post_backward_hook(state, handle):
    acc = handle.flat_param.expand_as(handle.flat_param).grad_fn.next_functions[0][0]
    handle._post_backward_hook_state = (acc, acc.register_hook(lambda *a: None))


def _pre_forward(state, handle, unshard_fn, module, args, kwargs):
    prefetch_mode = _PrefetchMode.FORWARD if torch.is_grad_enabled() else _PrefetchMode.NONE
    unshard_fn(state, handle)
    if prefetch_mode is _PrefetchMode.FORWARD and state.forward_prefetch:
        _prefetch_handle(state, handle, prefetch_mode)
    if torch.is_grad_enabled() and handle.flat_param.requires_grad:
        _register_post_backward_hook(state, handle)
    return args, kwargs
