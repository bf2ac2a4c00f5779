# Modelled on torch/distributed/fsdp/_runtime_utils.py (PyTorch 2.3-2.5, FSDP1).
import functools
from enum import auto, Enum
from typing import Any, Callable, Optional

import torch
import torch.nn as nn
from torch.distributed.fsdp._common_utils import _FSDPState, TrainingState
from torch.distributed.fsdp._flat_param import FlatParamHandle, HandleTrainingState
from torch.distributed.utils import _apply_to_tensors, _p_assert


class _PrefetchMode(Enum):
    BACKWARD = auto()
    FORWARD = auto()


def _pre_forward(
    state: _FSDPState,
    handle: Optional[FlatParamHandle],
    unshard_fn: Callable,
    module: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    with torch.profiler.record_function("FullyShardedDataParallel._pre_forward"):
        if handle and handle._training_state == HandleTrainingState.BACKWARD_PRE:
            return args, kwargs
        state.training_state = TrainingState.FORWARD_BACKWARD
        state._exec_order_data.record_pre_forward(handle, module.training)
        if handle:
            handle._training_state = HandleTrainingState.FORWARD
        if unshard_fn is not None:
            unshard_fn(state, handle)
        _register_post_backward_hook(state, handle)
        return args, kwargs


def _pre_forward_unshard(state: _FSDPState, handle: Optional[FlatParamHandle]) -> None:
    if not handle:
        return
    unshard_stream = (
        state._unshard_stream if torch.is_grad_enabled() else state._device_handle.current_stream()
    )
    if not handle._prefetched:
        _unshard(state, handle, unshard_stream, state._pre_unshard_stream)
    handle._needs_pre_forward_unshard = False
    if not torch.compiler.is_compiling():
        current_stream = state._device_handle.current_stream()
        if state._unshard_event is not None:
            current_stream.wait_event(state._unshard_event)
            state._unshard_event = None
        else:
            current_stream.wait_stream(unshard_stream)
    with torch.profiler.record_function("FullyShardedDataParallel._pre_forward_prefetch"):
        if state.forward_prefetch and torch.is_grad_enabled():
            _prefetch_handle(state, handle, _PrefetchMode.FORWARD)


def _post_forward(
    state: _FSDPState,
    handle: Optional[FlatParamHandle],
    reshard_fn: Callable,
    module: nn.Module,
    input: Any,
    output: Any,
) -> Any:
    with torch.profiler.record_function("FullyShardedDataParallel._post_forward"):
        if handle and handle._training_state == HandleTrainingState.BACKWARD_PRE:
            return output
        state._exec_order_data.record_post_forward(handle)
        if reshard_fn is not None:
            reshard_fn(state, handle)
        output = _register_pre_backward_hooks(state, module, output, handle)
        state.training_state = TrainingState.IDLE
        if handle:
            handle._training_state = HandleTrainingState.IDLE
        return output


def _register_pre_backward_hooks(state, module, outputs, handle):
    if not torch.is_grad_enabled():
        return outputs
    if state._is_root:
        state._post_backward_callback_queued = False
    if handle:
        handle._needs_pre_backward_unshard = False
        handle._ran_pre_backward_hook = False

    def _register_hook(t: torch.Tensor) -> torch.Tensor:
        if t.requires_grad:
            t.register_hook(
                torch.utils.hooks.unserializable_hook(
                    functools.partial(_pre_backward_hook, state, module, handle)
                )
            )
            if handle:
                handle._needs_pre_backward_unshard = True
        return t

    return _apply_to_tensors(_register_hook, outputs)


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
    _p_assert(temp_flat_param.grad_fn is not None, "The `grad_fn` is needed to access the `AccumulateGrad`")
    acc_grad = temp_flat_param.grad_fn.next_functions[0][0]
    hook_handle = acc_grad.register_hook(functools.partial(_post_backward_hook, state, handle))
    flat_param._post_backward_hook_state = (acc_grad, hook_handle)


def _unshard(state, handle, unshard_stream, pre_unshard_stream) -> None:
    with state._device_handle.stream(pre_unshard_stream):
        ran_pre_unshard = handle.pre_unshard()
    if ran_pre_unshard:
        unshard_stream.wait_stream(pre_unshard_stream)
    with state._device_handle.stream(unshard_stream):
        handle.unshard()
        handle.post_unshard()


def _prefetch_handle(state, current_handle, prefetch_mode) -> None:
    ...


def _pre_backward_hook(state, module, handle, grad, *unused):
    ...


def _post_backward_hook(state, handle, flat_param, *unused):
    ...
