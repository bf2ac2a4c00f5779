# Modeled on torch/distributed/fsdp/_flat_param.py (FlatParamHandle._force_full_precision,
# pre_unshard) and torch/distributed/fsdp/_runtime_utils.py (_pre_forward,
# _register_post_backward_hook, _register_post_backward_reshard_only_hook).
from enum import Enum, auto

import torch
import torch.nn as nn


class HandleTrainingState(Enum):
    IDLE = auto()
    FORWARD = auto()
    SUMMON_FULL_PARAMS = auto()


class FlatParamHandle:
    def __init__(self, flat_param, fully_sharded_module: nn.Module, mp_param_dtype=None,
                 mp_reduce_dtype=None, offload_params=False, use_full_prec_in_eval=False):
        self.flat_param = flat_param
        self._fully_sharded_module = fully_sharded_module
        self._uses_param_mixed_precision = mp_param_dtype is not None
        self._uses_reduce_mixed_precision = mp_reduce_dtype is not None
        self._offload_params = offload_params
        self._use_full_prec_in_eval = use_full_prec_in_eval
        self._training_state = HandleTrainingState.IDLE

    @property
    def _force_full_precision(self) -> bool:
        return (self._uses_param_mixed_precision or self._uses_reduce_mixed_precision) and (
            self._training_state == HandleTrainingState.SUMMON_FULL_PARAMS
            # Also disable mixed precision in eval, if configured
            or (not torch.is_grad_enabled() and self._use_full_prec_in_eval)
        )

    def _use_low_precision_shard(self):
        self.flat_param.data = self.flat_param._mp_shard

    def pre_unshard(self) -> bool:
        ret = False
        if self._uses_param_mixed_precision and not self._force_full_precision:
            self._use_low_precision_shard()
            ret = True
        elif self._offload_params and self.flat_param.device != torch.device("cuda"):
            self.flat_param.data = self.flat_param.to("cuda", non_blocking=True)
            ret = True
        return ret


def _register_post_backward_hook(state, handle: FlatParamHandle) -> None:
    # If there is no gradient computation, then there is no need for post-backward logic
    if not torch.is_grad_enabled():
        return
    if handle is None:
        return
    flat_param = handle.flat_param
    temp_flat_param = flat_param.expand_as(flat_param)
    acc_grad = temp_flat_param.grad_fn.next_functions[0][0]
    hook_handle = acc_grad.register_hook(lambda *unused: state._post_backward(handle))
    flat_param._post_backward_hook_state = (acc_grad, hook_handle)


def _register_post_backward_reshard_only_hook(state, handle, args, kwargs) -> None:
    if not torch.is_grad_enabled():
        return
    inp_tensors = [t for t in list(args) + list(kwargs.values()) if torch.is_tensor(t) and t.requires_grad]
    if not inp_tensors:
        return
    handle.flat_param._post_backward_hook_handle = torch.autograd.graph.register_multi_grad_hook(
        inp_tensors, lambda *unused: state._reshard(handle)
    )


def _pre_forward(state, handle, unshard_fn, module, args, kwargs):
    if handle:
        handle._training_state = HandleTrainingState.FORWARD
    unshard_fn(state, handle)
    _register_post_backward_hook(state, handle)
    should_cast_forward_inputs = handle and not handle._force_full_precision
    if should_cast_forward_inputs and state.mixed_precision.cast_forward_inputs:
        dtype = state.mixed_precision.param_dtype
        args = tuple(a.to(dtype) if torch.is_tensor(a) and a.is_floating_point() else a for a in args)
    _register_post_backward_reshard_only_hook(state, handle, args, kwargs)
    return args, kwargs
