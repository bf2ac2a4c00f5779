# adapted from pytorch/pytorch torch/distributed/fsdp/_runtime_utils.py
from typing import Any, Optional, Tuple

import torch
from torch.distributed.fsdp._common_utils import _FSDPState
from torch.distributed.fsdp._runtime_utils import _lazy_init, _wait_for_computation_stream
from torch.distributed.utils import _apply_to_tensors, _p_assert, _to_kwargs


def _root_pre_forward(state: _FSDPState, module: torch.nn.Module, args, kwargs) -> Tuple[Any, Any]:
    _lazy_init(state, module)
    _p_assert(state._is_root is not None, "Expects a root FSDP to have been set")
    if not state._is_root:
        return args, kwargs
    try:
        grad_on = torch.is_grad_enabled()
    except RuntimeError:
        grad_on = True
    if grad_on and state.forward_prefetch:
        handles_keys = []
        for fsdp_state in state._all_fsdp_states:
            handles_keys.extend((handle,) for handle in fsdp_state._handles)
        for handles_key in handles_keys:
            state._needs_pre_forward_unshard[handles_key] = True
    _wait_for_computation_stream(
        torch.cuda.current_stream(),
        state._streams["unshard"],
        state._streams["pre_unshard"],
    )

    args_tuple, kwargs_tuple = _to_kwargs(args, kwargs, state.compute_device.index, False)
    args = args_tuple[0]
    kwargs = kwargs_tuple[0]

    input_dtype: Optional[torch.dtype] = (
        state.mixed_precision.param_dtype if torch.is_grad_enabled() else None
    )
    if state.mixed_precision.cast_root_forward_inputs:
        args, kwargs = _cast_forward_inputs(input_dtype, *args, **kwargs)
    return args, kwargs


def _cast_forward_inputs(input_dtype: Optional[torch.dtype], *args: Any, **kwargs: Any) -> Tuple[Any, Any]:
    if input_dtype is not None:
        args, kwargs = _cast_fp_inputs_to_dtype(input_dtype, *args, **kwargs)
    return args, kwargs


def _cast_fp_inputs_to_dtype(dtype: torch.dtype, *args: Any, **kwargs: Any) -> Tuple[Any, Any]:
    def cast_fn(x: torch.Tensor) -> torch.Tensor:
        if not torch.is_floating_point(x) or x.dtype == dtype:
            return x
        return x.to(dtype)

    return (_apply_to_tensors(cast_fn, args), _apply_to_tensors(cast_fn, kwargs))


def _register_post_backward_hook(state: _FSDPState, handle) -> None:
    if not torch.is_grad_enabled():
        return
    if handle is None:
        return
    flat_param = handle.flat_param
    already_registered = hasattr(flat_param, "_post_backward_hook_state")
    if already_registered or not flat_param.requires_grad:
        return
    temp_flat_param = flat_param.expand_as(flat_param)
    acc_grad = temp_flat_param.grad_fn.next_functions[0][0]
    hook_handle = acc_grad.register_hook(lambda *unused: None)
    flat_param._post_backward_hook_state = (acc_grad, hook_handle)
