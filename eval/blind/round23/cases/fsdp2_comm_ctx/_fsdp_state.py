# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_state.py
from typing import Any

import torch
import torch.nn as nn

from ._fsdp_param_group import FSDPCommContext, FSDPParamGroup


class FSDPState:
    def __init__(self) -> None:
        self._fsdp_param_groups: list[FSDPParamGroup] = []
        self._comm_ctx = FSDPCommContext()
        self._states_to_forward_prefetch: list["FSDPState"] = []

    def init(self, modules: tuple[nn.Module, ...], device: torch.device) -> None:
        self._modules = modules
        self._device = device
        self._pre_forward_hook_handle = modules[0].register_forward_pre_hook(
            self._pre_forward, prepend=True, with_kwargs=True
        )
        self._post_forward_hook_handle = modules[0].register_forward_hook(
            self._post_forward, prepend=False
        )

    def _root_pre_forward(self, module, args, kwargs):
        # the comm context is shared by every state in the root's tree
        self._comm_ctx.grad_at_forward = torch.is_grad_enabled()
        current_stream = torch.cuda.current_stream()
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
        if torch.is_grad_enabled():
            output = self._register_pre_backward_hook(output)
        return output

    def _register_pre_backward_hook(self, output: Any) -> Any:
        for t in torch.utils._pytree.tree_leaves(output):
            if torch.is_tensor(t) and t.requires_grad:
                t.register_hook(self._pre_backward)
        return output

    def _pre_backward(self, grad):
        for fsdp_param_group in self._fsdp_param_groups:
            fsdp_param_group.pre_backward()
        return grad
