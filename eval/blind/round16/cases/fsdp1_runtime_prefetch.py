# adapted from pytorch/pytorch torch/distributed/fsdp/_runtime_utils.py
import functools
from enum import auto, Enum
from typing import Any, Callable, Dict, List, no_type_check, Optional, Tuple

import torch
import torch.nn as nn
from torch.distributed.fsdp._common_utils import _FSDPState, TrainingState
from torch.distributed.fsdp.flat_param import FlatParamHandle, HandleTrainingState
from torch.distributed.utils import _apply_to_tensors, _p_assert, _to_kwargs


class _PrefetchMode(Enum):
    BACKWARD = auto()
    FORWARD = auto()


@no_type_check
def _unshard(state, handles, unshard_stream, pre_unshard_stream) -> None:
    if not handles:
        return
    any_ran_pre_unshard = False
    with torch.cuda.stream(pre_unshard_stream):
        for handle in handles:
            ran_pre_unshard = handle.pre_unshard()
            any_ran_pre_unshard = any_ran_pre_unshard or ran_pre_unshard
    if any_ran_pre_unshard:
        unshard_stream.wait_stream(pre_unshard_stream)
    if state.limit_all_gathers:
        event = state._free_event_queue.dequeue_if_needed()
        if event:
            event.synchronize()
    with torch.cuda.stream(unshard_stream):
        for handle in handles:
            handle.unshard()
            handle.post_unshard()


@no_type_check
def _prefetch_handles(state, current_handles_key, prefetch_mode) -> None:
    if not current_handles_key:
        return
    handles_to_prefetch = _get_handles_to_prefetch(state, current_handles_key)
    for handles_key in handles_to_prefetch:
        if not state._needs_pre_forward_unshard.get(handles_key, False):
            continue
        _unshard(state, handles_key, state._streams["unshard"], state._streams["pre_unshard"])
        state._handles_prefetched[handles_key] = True


@no_type_check
def _pre_forward_unshard(state: _FSDPState, handles: List[FlatParamHandle]) -> None:
    """Unshards parameters in the pre-forward."""
    if not handles:
        return
    handles_key = tuple(handles)
    if not state._handles_prefetched.get(handles_key, False):
        _unshard(state, handles, state._streams["unshard"], state._streams["pre_unshard"])
    state._needs_pre_forward_unshard[handles_key] = False
    torch.cuda.current_stream().wait_stream(state._streams["unshard"])
    _prefetch_handles(state, handles_key, _PrefetchMode.FORWARD)


@no_type_check
def _root_pre_forward(state: _FSDPState, module: nn.Module, args, kwargs):
    _p_assert(state._is_root is not None, "Expects a root FSDP to have been set")
    if not state._is_root:
        return args, kwargs
    grad_on = torch.is_grad_enabled()
    if state.forward_prefetch:
        handles_keys = []
        for fsdp_state in state._all_fsdp_states:
            # Forward prefetch assumes singleton handles keys.
            handles_keys.extend((handle,) for handle in fsdp_state._handles if grad_on)
        for handles_key in handles_keys:
            state._needs_pre_forward_unshard[handles_key] = True
    args_tuple, kwargs_tuple = _to_kwargs(args, kwargs, state.compute_device.index, False)
    return args_tuple[0], kwargs_tuple[0]


@no_type_check
def _register_post_backward_hooks(state: _FSDPState, handles: List[FlatParamHandle]) -> None:
    # If there is no gradient computation, then there is no need for
    # post-backward logic
    if not torch.is_grad_enabled():
        return
    for handle in handles:
        flat_param = handle.flat_param
        already_registered = hasattr(flat_param, "_post_backward_hook_state")
        if already_registered or not flat_param.requires_grad:
            continue
        temp_flat_param = flat_param.expand_as(flat_param)
        acc_grad = temp_flat_param.grad_fn.next_functions[0][0]
        hook_handle = acc_grad.register_hook(
            functools.partial(_post_backward_hook, state, handle)
        )
        flat_param._post_backward_hook_state = (acc_grad, hook_handle)


@no_type_check
def _pre_forward(state, handles, unshard_fn, module, args, kwargs):
    state.training_state = TrainingState.FORWARD_BACKWARD
    state._exec_order_data.record_pre_forward(handles, module.training)
    for handle in handles:
        handle._training_state = HandleTrainingState.FORWARD
    if unshard_fn is not None:
        unshard_fn()
    _register_post_backward_hooks(state, handles)
    return args, kwargs


def _post_backward_hook(state, handle, *unused: Any):
    handle.flat_param._post_backward_called = True


def _get_handles_to_prefetch(state, current_handles_key):
    return state._exec_order_data.get_handles_to_forward_prefetch(current_handles_key)
