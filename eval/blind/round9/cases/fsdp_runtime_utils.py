import functools
from enum import auto, Enum
from typing import Any, List, no_type_check, Optional

import torch
from torch.distributed.fsdp._common_utils import _FSDPState, TrainingState
from torch.distributed.fsdp._flat_param import FlatParamHandle, HandleTrainingState


class _PrefetchMode(Enum):
    BACKWARD = auto()
    FORWARD = auto()


@no_type_check
def _unshard(state: _FSDPState, handle: FlatParamHandle, unshard_stream, pre_unshard_stream) -> None:
    if not handle:
        return
    with state._device_handle.stream(pre_unshard_stream):
        ran_pre_unshard = handle.pre_unshard()
    if ran_pre_unshard:
        unshard_stream.wait_stream(pre_unshard_stream)
    with state._device_handle.stream(unshard_stream):
        handle.unshard()
        handle.post_unshard()


@no_type_check
def _get_forward_prefetch_candidates(state: _FSDPState, current_handle: FlatParamHandle) -> List[FlatParamHandle]:
    if not state.forward_prefetch:
        return []
    order = state._exec_order_data
    target = order.get_handle_to_forward_prefetch(current_handle)
    return [target] if target is not None else []


@no_type_check
def _prefetch_handles(state: _FSDPState, handles: List[FlatParamHandle], prefetch_mode: _PrefetchMode) -> None:
    for handle in handles:
        prev_training_state = handle._training_state
        if prefetch_mode == _PrefetchMode.BACKWARD:
            handle._training_state = HandleTrainingState.BACKWARD_PRE
        else:
            handle._training_state = HandleTrainingState.FORWARD
        _unshard(state, handle, state._unshard_stream, state._pre_unshard_stream)
        handle._training_state = prev_training_state
        handle._prefetched = True


@no_type_check
def _pre_forward_unshard(state: _FSDPState, handle: Optional[FlatParamHandle]) -> None:
    if not handle:
        return
    if not handle._prefetched:
        _unshard(state, handle, state._unshard_stream, state._pre_unshard_stream)
    handle._needs_pre_forward_unshard = False
    state._device_handle.current_stream().wait_stream(state._unshard_stream)
    with torch.profiler.record_function("FullyShardedDataParallel._pre_forward_prefetch"):
        candidates = _get_forward_prefetch_candidates(state, handle)
        to_prefetch = [
            h for h in candidates
            if h._needs_pre_forward_unshard and not h._prefetched and torch.is_grad_enabled()
        ]
        _prefetch_handles(state, to_prefetch, _PrefetchMode.FORWARD)


@no_type_check
def _post_backward_hook(state: _FSDPState, handle: FlatParamHandle, flat_param, *unused: Any):
    flat_param._post_backward_called = True
    handle._training_state = HandleTrainingState.BACKWARD_POST
    if flat_param.grad is None:
        return
    state._post_backward_stream.wait_stream(state._device_handle.current_stream())
    with state._device_handle.stream(state._post_backward_stream):
        state._comm_hook(state._comm_hook_state, flat_param.grad)


@no_type_check
def _register_post_backward_hook(state: _FSDPState, handle: Optional[FlatParamHandle]) -> None:
    if not torch.is_grad_enabled():
        return
    if not handle:
        return
    flat_param = handle.flat_param
    already_registered = hasattr(flat_param, "_post_backward_hook_state")
    if already_registered or not flat_param.requires_grad:
        return
    temp_flat_param = flat_param.expand_as(flat_param)
    acc_grad = temp_flat_param.grad_fn.next_functions[0][0]
    hook_handle = acc_grad.register_hook(
        functools.partial(_post_backward_hook, state, handle, flat_param)
    )
    flat_param._post_backward_hook_state = (acc_grad, hook_handle)


@no_type_check
def _pre_forward(state: _FSDPState, handle: Optional[FlatParamHandle], unshard_fn, module, args, kwargs):
    with torch.profiler.record_function("FullyShardedDataParallel._pre_forward"):
        state.training_state = TrainingState.FORWARD_BACKWARD
        if handle:
            handle._training_state = HandleTrainingState.FORWARD
        if unshard_fn is not None:
            unshard_fn(state, handle)
        _register_post_backward_hook(state, handle)
        return args, kwargs
