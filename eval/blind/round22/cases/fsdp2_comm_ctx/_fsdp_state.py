# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_state.py
from typing import Any

import torch
import torch.nn as nn

from ._fsdp_param_group import FSDPCommContext, FSDPParamGroup


class FSDPStateContext:
    def __init__(self) -> None:
        self.all_states: list["FSDPState"] = []
        self.iter_forward_root: "FSDPState | None" = None


class FSDPState:
    def __init__(self) -> None:
        self._fsdp_param_groups: list[FSDPParamGroup] = []
        self._state_ctx = FSDPStateContext()
        self._comm_ctx = FSDPCommContext()

    def _root_pre_forward(self, module: nn.Module, args, kwargs):
        if self._state_ctx.iter_forward_root is not None:
            return args, kwargs
        self._state_ctx.iter_forward_root = self
        # shared by every param group of this root for the rest of the forward
        self._comm_ctx.forward_grad_enabled = torch.is_grad_enabled()
        current_stream = self._device_handle.current_stream()
        self._comm_ctx.all_gather_copy_in_stream.wait_stream(current_stream)
        self._comm_ctx.all_gather_stream.wait_stream(current_stream)
        return args, kwargs

    def _pre_forward(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]):
        args, kwargs = self._root_pre_forward(module, args, kwargs)
        for fsdp_param_group in self._fsdp_param_groups:
            args, kwargs = fsdp_param_group.pre_forward(module, args, kwargs)
        return args, kwargs

    def _post_forward(self, module: nn.Module, input: Any, output: Any) -> Any:
        for fsdp_param_group in self._fsdp_param_groups:
            output = fsdp_param_group.post_forward(module, input, output)
        if self._state_ctx.iter_forward_root is self:
            self._state_ctx.iter_forward_root = None
        return output
