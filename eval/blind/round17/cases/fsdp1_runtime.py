# adapted from pytorch/pytorch torch/distributed/fsdp/_runtime_utils.py
import functools
from typing import Any, Callable, List, no_type_check

import torch
import torch.nn as nn

from torch.distributed.fsdp._common_utils import _FSDPState, TrainingState
from torch.distributed.fsdp.flat_param import FlatParamHandle, HandleTrainingState


class _PrefetchMode:
    BACKWARD = "backward"
    FORWARD = "forward"


@no_type_check
def _pre_forward_unshard(
    state: _FSDPState,
    handles: List[FlatParamHandle],
) -> None:
    """Unshards parameters in the pre-forward."""
    if not handles:
        return
    handles_key = tuple(handles)
    # If the handles have been prefetched, then there is no need to call
    # `_unshard()` again
    if not state._handles_prefetched.get(handles_key, False):
        _unshard(
            state, handles, state._streams["unshard"], state._streams["pre_unshard"]
        )
    state._needs_pre_forward_unshard[handles_key] = False
    torch.cuda.current_stream().wait_stream(state._streams["unshard"])
    # decided once, on the first forward after lazy init
    if state._forward_prefetch_decided is None:
        state._forward_prefetch_decided = torch.is_grad_enabled()
    if state._forward_prefetch_decided:
        _prefetch_handles(state, handles_key, _PrefetchMode.FORWARD)


@no_type_check
def _register_post_backward_hooks(
    state: _FSDPState,
    handles: List[FlatParamHandle],
) -> None:
    """
    Registers post-backward hooks on the ``FlatParameter`` s'
    ``AccumulateGrad`` objects to reshard and to reduce-scatter gradients.
    """
    # If there is no gradient computation, then there is no need for
    # post-backward logic
    if not torch.is_grad_enabled():
        return
    for handle in handles:
        flat_param = handle.flat_param
        already_registered = hasattr(flat_param, "_post_backward_hook_state")
        if already_registered or not flat_param.requires_grad:
            continue
        # Get the `AccumulateGrad` object
        temp_flat_param = flat_param.expand_as(flat_param)
        acc_grad = temp_flat_param.grad_fn.next_functions[0][0]  # type: ignore[union-attr]
        hook_handle = acc_grad.register_hook(
            functools.partial(_post_backward_hook, state, handle)
        )
        flat_param._post_backward_hook_state = (acc_grad, hook_handle)  # type: ignore[attr-defined]


@no_type_check
def _pre_forward(
    state: _FSDPState,
    handles: List[FlatParamHandle],
    unshard_fn: Callable,
    module: nn.Module,
    args,
    kwargs,
):
    state.training_state = TrainingState.FORWARD_BACKWARD
    state._exec_order_data.record_pre_forward(handles, module.training)
    for handle in handles:
        handle._training_state = HandleTrainingState.FORWARD
    if unshard_fn is not None:
        unshard_fn()
    # Register post-backward hooks to reshard the parameters and reduce-scatter
    # their gradients. They must be re-registered every forward pass in case
    # the `grad_fn` is mutated.
    _register_post_backward_hooks(state, handles)
    return args, kwargs
