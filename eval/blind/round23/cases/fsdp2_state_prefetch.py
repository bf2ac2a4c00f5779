# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_state.py
import functools
import logging
from typing import Any

import torch
import torch.nn as nn
from torch.distributed.utils import _apply_to_tensors, _to_kwargs

from ._fsdp_common import _cast_fp_tensor, _dynamo_disable, TrainingState
from ._fsdp_param_group import FSDPCommContext, FSDPParamGroup

logger = logging.getLogger("torch.distributed.fsdp.fully_shard")


class FSDPState:
    _state_name: str = "FSDP"

    def __init__(self) -> None:
        self._fsdp_param_groups: list[FSDPParamGroup] = []
        self._is_root = None
        self._comm_ctx = FSDPCommContext()
        self._training_state: TrainingState = TrainingState.IDLE
        self._states_to_forward_prefetch: list["FSDPState"] = []
        self._states_to_backward_prefetch: list["FSDPState"] = []

    @_dynamo_disable
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
        if torch.is_grad_enabled() and self._mp_policy.cast_forward_inputs and self._mp_policy.param_dtype:
            with torch.profiler.record_function("FSDP::cast_forward_inputs"):
                cast_fn = functools.partial(
                    _cast_fp_tensor, self._mp_policy.param_dtype
                )
                args, kwargs = (
                    _apply_to_tensors(cast_fn, args),
                    _apply_to_tensors(cast_fn, kwargs),
                )
        for fsdp_param_group in self._fsdp_param_groups:
            args, kwargs = fsdp_param_group.pre_forward(module, args, kwargs)
        if torch.is_grad_enabled():
            # Forward order (not reversed) to match forward execution order
            for fsdp_state in self._states_to_forward_prefetch:
                for target_param_group in fsdp_state._fsdp_param_groups:
                    FSDPParamGroup._prefetch_unshard(target_param_group, "forward")
        return args, kwargs

    @_dynamo_disable
    def _post_forward(self, module: nn.Module, input: Any, output: Any) -> Any:
        if self._training_state == TrainingState.PRE_BACKWARD:
            return output
        for fsdp_param_group in self._fsdp_param_groups:
            output = fsdp_param_group.post_forward(module, input, output)
        output = self._register_pre_backward_hook(output)
        self._training_state = TrainingState.IDLE
        return output

    def _register_pre_backward_hook(self, output: Any) -> Any:
        if not torch.is_grad_enabled():
            return output
        flat_outputs, _ = torch.utils._pytree.tree_flatten(output)
        for t in flat_outputs:
            if torch.is_tensor(t) and t.requires_grad:
                t.register_hook(self._pre_backward)
        return output

    def _pre_backward(self, grad: torch.Tensor) -> torch.Tensor:
        self._training_state = TrainingState.PRE_BACKWARD
        for fsdp_param_group in self._fsdp_param_groups:
            fsdp_param_group.pre_backward()
        return grad
