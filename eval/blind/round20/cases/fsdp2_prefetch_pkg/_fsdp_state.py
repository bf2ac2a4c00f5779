# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_state.py
import logging
from typing import Any

import torch
import torch.nn as nn
from torch.distributed.utils import _to_kwargs

from torch.distributed.fsdp._fully_shard._fsdp_common import _dynamo_disable, TrainingState
from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPCommContext, FSDPParamGroup

from ._grad_state import forward_prefetch_enabled, record_grad_mode

logger = logging.getLogger("torch.distributed.fsdp.fully_shard")


class FSDPState:
    def __init__(self) -> None:
        self._fsdp_param_groups: list[FSDPParamGroup] = []
        self._comm_ctx = FSDPCommContext()
        self._training_state: TrainingState = TrainingState.IDLE
        self._states_to_forward_prefetch: list[FSDPState] = []
        self._iter_forward_root = None

    def _root_pre_forward(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]):
        if self._iter_forward_root is not None:
            return args, kwargs
        logger.debug("FSDP::root_pre_forward")
        self._iter_forward_root = self
        record_grad_mode()
        with torch.profiler.record_function("FSDP::root_pre_forward"):
            current_stream = self._device_handle.current_stream()
            self._comm_ctx.all_gather_copy_in_stream.wait_stream(current_stream)
            self._comm_ctx.all_gather_stream.wait_stream(current_stream)
            args_tuple, kwargs_tuple = _to_kwargs(args, kwargs, self._device, False)
            args, kwargs = args_tuple[0], kwargs_tuple[0]
        return args, kwargs

    @_dynamo_disable
    def _pre_forward(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]):
        if self._training_state == TrainingState.PRE_BACKWARD:
            return args, kwargs
        self._training_state = TrainingState.FORWARD
        args, kwargs = self._root_pre_forward(module, args, kwargs)
        for fsdp_param_group in self._fsdp_param_groups:
            args, kwargs = fsdp_param_group.pre_forward(module, args, kwargs)
        if forward_prefetch_enabled():
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
        if self._iter_forward_root is self:
            self._iter_forward_root = None
        return output

    def _register_pre_backward_hook(self, output: Any) -> Any:
        if not forward_prefetch_enabled():
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
