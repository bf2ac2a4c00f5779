# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_state.py
import functools
from typing import Any

import torch
import torch.nn as nn
from torch.distributed.fsdp._fully_shard._fsdp_common import TrainingState
from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup
from torch.distributed.utils import _apply_to_tensors, _cast_fp_tensor
from torch.utils._pytree import tree_flatten


class FSDPState:
    def __init__(self):
        self._fsdp_param_groups: list[FSDPParamGroup] = []
        self._states_to_forward_prefetch: list["FSDPState"] = []
        self._training_state = TrainingState.IDLE
        self._mp_policy = None

    def _root_pre_forward(self, module, args, kwargs):
        return args, kwargs

    def _pre_forward(
        self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if self._training_state == TrainingState.PRE_BACKWARD:
            for fsdp_param_group in self._fsdp_param_groups:
                if not fsdp_param_group.is_unsharded:
                    fsdp_param_group.unshard()
                    fsdp_param_group.wait_for_unshard()
            return args, kwargs
        self._training_state = TrainingState.FORWARD
        args, kwargs = self._root_pre_forward(module, args, kwargs)
        if self._mp_policy.cast_forward_inputs and self._mp_policy.param_dtype:
            cast_fn = functools.partial(_cast_fp_tensor, self._mp_policy.param_dtype)
            args, kwargs = _apply_to_tensors(cast_fn, args), _apply_to_tensors(cast_fn, kwargs)
        for fsdp_param_group in self._fsdp_param_groups:
            args, kwargs = fsdp_param_group.pre_forward(module, args, kwargs)
        prefetch_states = [s for s in self._states_to_forward_prefetch if torch.is_grad_enabled()]
        for fsdp_state in prefetch_states:
            for target_param_group in fsdp_state._fsdp_param_groups:
                FSDPParamGroup._prefetch_unshard(target_param_group, "forward")
        return args, kwargs

    def _post_forward(self, module: nn.Module, input: Any, output: Any) -> Any:
        if self._training_state == TrainingState.PRE_BACKWARD:
            return output
        for fsdp_param_group in self._fsdp_param_groups:
            output = fsdp_param_group.post_forward(module, input, output)
        output = self._register_pre_backward_hook(output)
        self._training_state = TrainingState.IDLE
        return output

    def _pre_backward(self, grad: torch.Tensor) -> torch.Tensor:
        self._training_state = TrainingState.PRE_BACKWARD
        for fsdp_param_group in self._fsdp_param_groups:
            fsdp_param_group.pre_backward(True)
        return grad

    def _register_pre_backward_hook(self, output: Any) -> Any:
        if not torch.is_grad_enabled():
            return output
        flat_outputs, _ = tree_flatten(output)
        tensors = tuple(t for t in flat_outputs if (torch.is_tensor(t) and t.requires_grad))
        for tensor in tensors:
            tensor.register_hook(self._pre_backward)
        return output
