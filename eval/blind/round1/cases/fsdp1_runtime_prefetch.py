# mypy: allow-untyped-defs
"""Pre/post-forward runtime logic, trimmed from torch/distributed/fsdp/_runtime_utils.py."""
import functools
from typing import Any, Callable, Optional

import torch
from torch.distributed.fsdp._common_utils import _FSDPState, TrainingState
from torch.distributed.fsdp._flat_param import (
    FlatParamHandle,
    HandleTrainingState,
    RESHARD_AFTER_FORWARD_HANDLE_STRATEGIES,
)
from torch.distributed.fsdp._runtime_utils import (
    _PrefetchMode,
    _pre_backward_hook,
    _prefetch_handle,
    _register_post_backward_hook,
    _reshard,
    _unshard,
)
from torch.distributed.utils import _apply_to_tensors, _p_assert


@torch.no_grad()
def _pre_forward_unshard(state: _FSDPState, handle: Optional[FlatParamHandle]) -> None:
    """Unshards parameters in the pre-forward."""
    if not handle:
        return
    # If the handles have been prefetched, then there is no need to call
    # `_unshard()` again
    if not handle._prefetched:
        _unshard(state, handle, state._unshard_stream, state._pre_unshard_stream)
    handle._needs_pre_forward_unshard = False
    state._device_handle.current_stream().wait_stream(state._unshard_stream)


def _pre_forward(
    state: _FSDPState,
    handle: Optional[FlatParamHandle],
    unshard_fn: Callable,
    module: torch.nn.Module,
    args: Any,
    kwargs: Any,
):
    with torch.profiler.record_function("FullyShardedDataParallel._pre_forward"):
        if handle and handle._training_state == HandleTrainingState.BACKWARD_PRE:
            return args, kwargs
        state.training_state = TrainingState.FORWARD_BACKWARD
        state._exec_order_data.record_pre_forward(handle, module.training)
        if handle:
            handle._training_state = HandleTrainingState.FORWARD
        if unshard_fn is not None:
            unshard_fn(state, handle)
        if state.forward_prefetch and torch.is_grad_enabled():
            _prefetch_handle(state, handle, _PrefetchMode.FORWARD)
        # Register post-backward hooks to reshard the parameters and reduce-scatter their gradients.
        _register_post_backward_hook(state, handle)
        return args, kwargs


def _post_forward(
    state: _FSDPState,
    handle: Optional[FlatParamHandle],
    reshard_fn: Callable,
    module: torch.nn.Module,
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


def _post_forward_reshard(state: _FSDPState, handle: FlatParamHandle) -> None:
    """Reshards parameters in the post-forward."""
    if not handle:
        return
    # Do not free the root's parameters in the post-forward for `FULL_SHARD`
    # with the intention that they are immediately used for backward
    # computation (though this may not be true)
    free_unsharded_flat_param = (
        (not state._is_root or not torch.is_grad_enabled())
        and handle._sharding_strategy in RESHARD_AFTER_FORWARD_HANDLE_STRATEGIES
    )
    _reshard(state, handle, free_unsharded_flat_param)


def _register_pre_backward_hooks(state, module, outputs, handle):
    """Registers pre-backward hooks on the tensors that require gradients in the forward pass outputs."""
    # If there is no gradient computation, then there is no need for
    # pre-backward logic
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
