# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_state.py
import functools
from typing import Any

import torch
import torch.nn as nn
from torch.distributed.utils import _apply_to_tensors, _to_kwargs

from ._common import TrainingState, _cast_fp_tensor, _grad_on
from ._param_group import FSDPCommContext, FSDPParamGroup


class FSDPState:
    def __init__(self) -> None:
        self._fsdp_param_groups: list[FSDPParamGroup] = []
        self._is_root = None
        self._comm_ctx = FSDPCommContext()
        self._training_state: TrainingState = TrainingState.IDLE
        self._states_to_forward_prefetch: list["FSDPState"] = []
        self._iter_forward_root = None

    def init(self, module: nn.Module, device: torch.device, mp_policy) -> None:
        self._module = module
        self._device = device
        self._mp_policy = mp_policy
        self._pre_forward_hook_handle = module.register_forward_pre_hook(
            self._pre_forward, prepend=True, with_kwargs=True
        )
        self._post_forward_hook_handle = module.register_forward_hook(self._post_forward, prepend=False)

    def _init_shared_state(self) -> None:
        if self._is_root is not None:
            return
        self._is_root = True
        self._comm_ctx.lazy_init(self._device)
        for fsdp_param_group in self._fsdp_param_groups:
            # all parameter groups of this root share one communication context
            fsdp_param_group.comm_ctx = self._comm_ctx

    def _root_pre_forward(self, module: nn.Module, args, kwargs):
        if self._iter_forward_root is not None:
            return args, kwargs
        self._iter_forward_root = self
        self._init_shared_state()
        # remembered for the parameter groups' stream selection this iteration
        self._comm_ctx.grad_hint = torch.is_grad_enabled()
        current_stream = self._comm_ctx.device_handle.current_stream()
        self._comm_ctx.all_gather_copy_in_stream.wait_stream(current_stream)
        self._comm_ctx.all_gather_stream.wait_stream(current_stream)
        args_tuple, kwargs_tuple = _to_kwargs(args, kwargs, self._device, False)
        return args_tuple[0], kwargs_tuple[0]

    def _pre_forward(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]):
        if self._training_state == TrainingState.PRE_BACKWARD:
            return args, kwargs
        self._training_state = TrainingState.FORWARD
        args, kwargs = self._root_pre_forward(module, args, kwargs)
        if self._mp_policy.cast_forward_inputs and self._mp_policy.param_dtype:
            cast_fn = functools.partial(_cast_fp_tensor, self._mp_policy.param_dtype)
            args, kwargs = _apply_to_tensors(cast_fn, args), _apply_to_tensors(cast_fn, kwargs)
        for fsdp_param_group in self._fsdp_param_groups:
            args, kwargs = fsdp_param_group.pre_forward(module, args, kwargs)
        if _grad_on() and self._states_to_forward_prefetch:
            for fsdp_state in self._states_to_forward_prefetch:
                for target_param_group in fsdp_state._fsdp_param_groups:
                    FSDPParamGroup._prefetch_unshard(target_param_group, "forward")
        return args, kwargs

    def _post_forward(self, module: nn.Module, input: Any, output: Any) -> Any:
        if self._training_state == TrainingState.PRE_BACKWARD:
            return output
        for fsdp_param_group in self._fsdp_param_groups:
            output = fsdp_param_group.post_forward(module, input, output)
        if torch.is_grad_enabled():
            output = self._register_pre_backward_hook(output)
        self._training_state = TrainingState.IDLE
        if self._iter_forward_root is self:
            self._comm_ctx.all_gather_state = None
            self._iter_forward_root = None
        return output

    def _register_pre_backward_hook(self, output: Any) -> Any:
        def _register(t: torch.Tensor) -> torch.Tensor:
            if t.requires_grad:
                t.register_hook(functools.partial(self._pre_backward))
            return t

        return _apply_to_tensors(_register, output)

    def _pre_backward(self, grad: torch.Tensor) -> torch.Tensor:
        self._training_state = TrainingState.PRE_BACKWARD
        for fsdp_param_group in self._fsdp_param_groups:
            fsdp_param_group.pre_backward()
        return grad
