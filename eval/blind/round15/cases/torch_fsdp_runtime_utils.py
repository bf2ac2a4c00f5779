# adapted from pytorch/pytorch torch/distributed/fsdp/_runtime_utils.py
import functools
from enum import auto, Enum
from typing import Any, Callable, Dict, List, no_type_check, Optional, Tuple

import torch
import torch.nn as nn
from torch.distributed.fsdp._common_utils import _assert_in_training_states, _FSDPState, TrainingState
from torch.distributed.fsdp.flat_param import (
    _HandlesKey,
    FlatParamHandle,
    HandleTrainingState,
    RESHARD_AFTER_FORWARD_HANDLE_STRATEGIES,
)
from torch.distributed.utils import _apply_to_tensors, _p_assert, _to_kwargs


class _PrefetchMode(Enum):
    BACKWARD = auto()
    FORWARD = auto()


@no_type_check
def _unshard(
    state: _FSDPState,
    handles: List[FlatParamHandle],
    unshard_stream: torch.cuda.Stream,
    pre_unshard_stream: torch.cuda.Stream,
) -> None:
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
def _reshard(state: _FSDPState, handles: List[FlatParamHandle], free_unsharded_flat_params: List[bool]):
    if not handles:
        return
    for handle, free_unsharded_flat_param in zip(handles, free_unsharded_flat_params):
        handle.reshard(free_unsharded_flat_param)
        if state.limit_all_gathers and free_unsharded_flat_param:
            free_event = torch.cuda.Event()
            free_event.record()
            state._free_event_queue.enqueue(free_event)
        handle.post_reshard()
    handles_key = tuple(handles)
    if any(free_unsharded_flat_params):
        state._handles_prefetched.pop(handles_key, None)


@no_type_check
def _pre_forward(
    state: _FSDPState,
    handles: List[FlatParamHandle],
    unshard_fn: Callable,
    module: nn.Module,
    args: Tuple[Any, ...],
    kwargs: Dict[str, Any],
) -> Tuple[Tuple[Any, ...], Dict[str, Any]]:
    state.training_state = TrainingState.FORWARD_BACKWARD
    state._exec_order_data.record_pre_forward(handles, module.training)
    for handle in handles:
        handle._training_state = HandleTrainingState.FORWARD
    if unshard_fn is not None:
        unshard_fn()
    _register_post_backward_hooks(state, handles)
    return args, kwargs


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
def _post_forward(
    state: _FSDPState,
    handles: List[FlatParamHandle],
    reshard_fn: Callable,
    module: nn.Module,
    input: Any,
    output: Any,
) -> Any:
    state._exec_order_data.record_post_forward(handles)
    if reshard_fn is not None:
        reshard_fn()
    output = _register_pre_backward_hooks(state, module, output, handles)
    state.training_state = TrainingState.IDLE
    for handle in handles:
        handle._training_state = HandleTrainingState.IDLE
    return output


@no_type_check
def _post_forward_reshard(state: _FSDPState, handles: List[FlatParamHandle]) -> None:
    """Reshards parameters in the post-forward."""
    if not handles:
        return
    free_unsharded_flat_params = [
        not state._is_root and handle._sharding_strategy in RESHARD_AFTER_FORWARD_HANDLE_STRATEGIES
        for handle in handles
    ]
    _reshard(state, handles, free_unsharded_flat_params)


@no_type_check
def _prefetch_handles(state: _FSDPState, current_handles_key: _HandlesKey, prefetch_mode: _PrefetchMode) -> None:
    """
    Prefetches the next handles if needed (without synchronization). An empty
    handles key cannot prefetch.
    """
    if not current_handles_key:
        return
    handles_to_prefetch = _get_handles_to_prefetch(state, current_handles_key, prefetch_mode)
    for handles_key in handles_to_prefetch:
        prev_training_states: List[HandleTrainingState] = []
        for handle in handles_key:
            prev_training_states.append(handle._training_state)
            handle._training_state = (
                HandleTrainingState.BACKWARD_PRE
                if prefetch_mode == _PrefetchMode.BACKWARD
                else HandleTrainingState.FORWARD
            )
        _unshard(state, handles_key, state._streams["unshard"], state._streams["pre_unshard"])
        for handle, prev_training_state in zip(handles_key, prev_training_states):
            handle._training_state = prev_training_state
        state._handles_prefetched[handles_key] = True


@no_type_check
def _get_handles_to_prefetch(
    state: _FSDPState, current_handles_key: _HandlesKey, prefetch_mode: _PrefetchMode
) -> List[_HandlesKey]:
    eod = state._exec_order_data
    if prefetch_mode == _PrefetchMode.BACKWARD:
        target_handles_keys = eod.get_handles_to_backward_prefetch(current_handles_key)
    else:
        target_handles_keys = [
            handles_key
            for handles_key in eod.get_handles_to_forward_prefetch(current_handles_key)
            if state._needs_pre_forward_unshard.get(handles_key, False) and torch.is_grad_enabled()
        ]
    return [
        handles_key
        for handles_key in target_handles_keys
        if not state._handles_prefetched.get(handles_key, False)
    ]


@no_type_check
def _register_pre_backward_hooks(
    state: _FSDPState,
    module: nn.Module,
    outputs: Any,
    handles: List[FlatParamHandle],
) -> None:
    """
    Registers pre-backward hooks on the tensors that require gradients in the
    forward pass outputs ``outputs``, which were computed using the
    ``FlatParameter`` s of ``handles``.
    """
    if not torch.is_grad_enabled():
        return outputs
    if state._is_root:
        state._post_backward_callback_queued = False
    handles_key = tuple(handles)
    if handles_key:
        state._needs_pre_backward_unshard[handles_key] = False
        state._ran_pre_backward_hook[handles_key] = False

    def _register_hook(t: torch.Tensor) -> torch.Tensor:
        if t.requires_grad:
            t.register_hook(functools.partial(_pre_backward_hook, state, module, handles))
            state._needs_pre_backward_unshard[handles_key] = True
        return t

    return _apply_to_tensors(_register_hook, outputs)


def _register_post_backward_hooks(state: _FSDPState, handles: List[FlatParamHandle]) -> None:
    """
    Registers post-backward hooks on the ``FlatParameter`` s'
    ``AccumulateGrad`` objects to reshard and to reduce-scatter gradients.
    """
    if not torch.is_grad_enabled() or not handles:
        return
    for handle in handles:
        flat_param = handle.flat_param
        already_registered = hasattr(flat_param, "_post_backward_hook_state")
        if already_registered or not flat_param.requires_grad:
            continue
        temp_flat_param = flat_param.expand_as(flat_param)
        _p_assert(temp_flat_param.grad_fn is not None, "The `grad_fn` is needed to access the `AccumulateGrad`")
        acc_grad = temp_flat_param.grad_fn.next_functions[0][0]
        hook_handle = acc_grad.register_hook(functools.partial(_post_backward_hook, state, handle))
        flat_param._post_backward_hook_state = (acc_grad, hook_handle)


@no_type_check
def _pre_backward_hook(state: _FSDPState, module: nn.Module, _handles: List[FlatParamHandle], *unused: Any) -> Any:
    _handles_key = tuple(_handles)
    if _handles_key and state._ran_pre_backward_hook.get(_handles_key, False):
        return
    state.training_state = TrainingState.FORWARD_BACKWARD
    for handle in _handles:
        handle._training_state = HandleTrainingState.BACKWARD_PRE
    if state._needs_pre_backward_unshard[_handles_key]:
        if not state._handles_prefetched.get(_handles_key, False):
            _unshard(state, _handles, state._streams["unshard"], state._streams["pre_unshard"])
        torch.cuda.current_stream().wait_stream(state._streams["unshard"])
    state._needs_pre_backward_unshard[_handles_key] = False
    _prefetch_handles(state, _handles_key, _PrefetchMode.BACKWARD)
    for handle in _handles:
        handle.prepare_gradient_for_backward()
    state._ran_pre_backward_hook[_handles_key] = True


@no_type_check
@torch.no_grad()
def _post_backward_hook(state: _FSDPState, handle: FlatParamHandle, *unused: Any):
    flat_param = handle.flat_param
    flat_param._post_backward_called = True
    _assert_in_training_states(state, [TrainingState.FORWARD_BACKWARD])
    handle._training_state = HandleTrainingState.BACKWARD_POST
    if flat_param.grad is None:
        return
    _reshard(state, [handle], [True])
    _prefetch_handles(state, (handle,), _PrefetchMode.BACKWARD)
