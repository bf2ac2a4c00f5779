# Adapted from pytorch/pytorch torch/distributed/fsdp/_runtime_utils.py
# (_pre_forward_unshard, _post_forward_reshard, _register_post_backward_hooks).
from typing import List

import torch

from torch.distributed.fsdp._flat_param import FlatParamHandle
from torch.distributed.fsdp._runtime_utils import (
    RESHARD_AFTER_FORWARD_HANDLE_STRATEGIES,
    _PrefetchMode,
    _post_backward_hook,
    _prefetch_handles,
    _reshard,
    _unshard,
)

from ._fwd_state import _FWD_STATE


def _pre_forward_unshard(state, handles: List[FlatParamHandle]) -> None:
    if not handles:
        return
    handles_key = tuple(handles)
    if not state._handles_prefetched.get(handles_key, False):
        _unshard(state, handles, state._streams["unshard"], state._streams["pre_unshard"])
    state._needs_pre_forward_unshard[handles_key] = False
    torch.cuda.current_stream().wait_stream(state._streams["unshard"])
    if state.forward_prefetch and _FWD_STATE.grad_enabled:
        _prefetch_handles(state, handles_key, _PrefetchMode.FORWARD)


def _post_forward_reshard(state, handles: List[FlatParamHandle]) -> None:
    if not handles:
        return
    free_unsharded_flat_params = [
        not state._is_root
        and handle._sharding_strategy in RESHARD_AFTER_FORWARD_HANDLE_STRATEGIES
        and _FWD_STATE.grad_enabled
        for handle in handles
    ]
    _reshard(state, handles, free_unsharded_flat_params)


def _register_post_backward_hooks(state, handles: List[FlatParamHandle]) -> None:
    if not _FWD_STATE.grad_enabled:
        return
    for handle in handles:
        flat_param = handle.flat_param
        already_registered = hasattr(flat_param, "_post_backward_hook_state")
        if already_registered or not flat_param.requires_grad:
            continue
        temp_flat_param = flat_param.expand_as(flat_param)
        acc_grad = temp_flat_param.grad_fn.next_functions[0][0]
        hook_handle = acc_grad.register_hook(lambda *unused, h=handle: _post_backward_hook(state, h, *unused))
        flat_param._post_backward_hook_state = (acc_grad, hook_handle)
