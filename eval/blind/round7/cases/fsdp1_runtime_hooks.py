import functools
from typing import Any, List, Optional

import torch
import torch.nn as nn
from torch.utils import _pytree as pytree

from torch.distributed.fsdp._common_utils import _FSDPState, TrainingState, HandleTrainingState
from torch.distributed.fsdp._flat_param import FlatParamHandle


def _unshard(state: _FSDPState, handle: FlatParamHandle, unshard_stream, pre_unshard_stream):
    if not handle:
        return
    with state._device_handle.stream(pre_unshard_stream):
        ran_pre_unshard = handle.pre_unshard()
    if ran_pre_unshard:
        unshard_stream.wait_stream(pre_unshard_stream)
    with state._device_handle.stream(unshard_stream):
        handle.unshard()
        handle.post_unshard()


def _get_handle_to_prefetch(state: _FSDPState, current_handle: FlatParamHandle) -> Optional[FlatParamHandle]:
    target_handle = current_handle._prefetched_handle if hasattr(current_handle, "_prefetched_handle") else None
    if target_handle is None:
        eod = state._exec_order_data
        target_handle = eod.get_handle_to_forward_prefetch(current_handle)
    return target_handle


def _prefetch_handle(state: _FSDPState, current_handle: FlatParamHandle) -> None:
    target = _get_handle_to_prefetch(state, current_handle)
    if target is None or target._prefetched:
        return
    prev_training_state = target._training_state
    target._training_state = HandleTrainingState.FORWARD
    _unshard(state, target, state._unshard_stream, state._pre_unshard_stream)
    target._training_state = prev_training_state
    target._prefetched = True


def _register_pre_backward_hooks(state: _FSDPState, module: nn.Module, outputs: Any,
                                 handle: FlatParamHandle) -> Any:
    if not torch.is_grad_enabled():
        return outputs
    if state._is_root:
        state._post_backward_callback_queued = False
    if handle:
        handle._needs_pre_backward_unshard = False
        handle._ran_pre_backward_hook = False

    def _register_hook(t: torch.Tensor) -> torch.Tensor:
        if t.requires_grad:
            t.register_hook(functools.partial(state._pre_backward_hook_fn, handle))
            if handle:
                handle._needs_pre_backward_unshard = True
        return t

    return pytree.tree_map_only(torch.Tensor, _register_hook, outputs)


def _register_post_backward_hook(state: _FSDPState, handle: Optional[FlatParamHandle]) -> None:
    if not torch.is_grad_enabled() or not handle:
        return
    flat_param = handle.flat_param
    already_registered = hasattr(flat_param, "_post_backward_hook_state")
    if already_registered or not flat_param.requires_grad:
        return
    temp_flat_param = flat_param.expand_as(flat_param)
    acc_grad = temp_flat_param.grad_fn.next_functions[0][0]
    hook_handle = acc_grad.register_hook(functools.partial(state._post_backward_hook_fn, handle))
    flat_param._post_backward_hook_state = (acc_grad, hook_handle)


def _pre_forward_unshard(state: _FSDPState, handle: Optional[FlatParamHandle]) -> None:
    if not handle:
        return
    if not handle._prefetched:
        _unshard(state, handle, state._unshard_stream, state._pre_unshard_stream)
    handle._needs_pre_forward_unshard = False
    state._device_handle.current_stream().wait_stream(state._unshard_stream)
    if state.forward_prefetch and torch.is_grad_enabled():
        with torch.profiler.record_function("FullyShardedDataParallel._pre_forward_prefetch"):
            _prefetch_handle(state, handle)


def _pre_forward(state: _FSDPState, handle, unshard_fn, module: nn.Module, args, kwargs):
    with torch.profiler.record_function("FullyShardedDataParallel._pre_forward"):
        if handle and handle._training_state == HandleTrainingState.BACKWARD_PRE:
            return args, kwargs
        state.training_state = TrainingState.FORWARD_BACKWARD
        if handle:
            handle._training_state = HandleTrainingState.FORWARD
        if unshard_fn is not None:
            unshard_fn(state, handle)
        _register_post_backward_hook(state, handle)
        return args, kwargs
