# mypy: allow-untyped-defs
"""FSDPState pre/post-forward hooks (trimmed from torch/distributed/_composable/fsdp/_fsdp_state.py)."""
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.nn as nn
from torch.autograd import Variable
from torch.distributed._composable_state import _State
from torch.utils._pytree import tree_flatten

from ._fsdp_mp import MixedPrecisionPolicy, cast_forward_inputs
from ._fsdp_prefetch import run_forward_prefetch


class FSDPStateContext:
    """This has state shared across FSDP states."""

    def __init__(self) -> None:
        self.all_states: List["FSDPState"] = []
        self.iter_forward_root: Optional["FSDPState"] = None
        self.post_backward_final_callback_queued: bool = False
        self.is_last_backward: bool = True
        self.grad_enabled: bool = True


class FSDPState(_State):

    def __init__(self) -> None:
        super().__init__()
        self._fsdp_param_group = None
        self._is_root: Optional[bool] = None
        self._state_ctx = FSDPStateContext()
        self._mp_policy = MixedPrecisionPolicy()
        self._states_to_forward_prefetch: List["FSDPState"] = []

    def _root_pre_forward(self, module: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]):
        self._lazy_init()
        if self._state_ctx.iter_forward_root is not None:
            return args, kwargs
        self._state_ctx.iter_forward_root = self
        self._state_ctx.grad_enabled = torch.is_grad_enabled()
        with torch.profiler.record_function("FSDP::root_pre_forward"):
            if self._fsdp_param_group is not None:
                current_stream = self._comm_ctx.device_handle.current_stream()
                self._comm_ctx.all_gather_copy_in_stream.wait_stream(current_stream)
                self._comm_ctx.all_gather_stream.wait_stream(current_stream)
        return args, kwargs

    def _pre_forward(self, module: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]):
        args, kwargs = self._root_pre_forward(module, args, kwargs)
        args, kwargs = cast_forward_inputs(self._mp_policy, self._state_ctx, args, kwargs)
        if self._fsdp_param_group:
            args, kwargs = self._fsdp_param_group.pre_forward(module, args, kwargs)
        run_forward_prefetch(self._states_to_forward_prefetch, self._state_ctx)
        return args, kwargs

    def _post_forward(self, module: nn.Module, input: Any, output: Any) -> Any:
        if self._fsdp_param_group:
            output = self._fsdp_param_group.post_forward(module, input, output)
        output = self._register_pre_backward_hook(output)
        if self._state_ctx.iter_forward_root is self:
            if self._state_ctx.grad_enabled:
                self._register_root_post_backward_final_callback()
            self._state_ctx.iter_forward_root = None
        return output

    def _register_pre_backward_hook(self, output: Any) -> Any:
        if not self._state_ctx.grad_enabled:
            return output
        flat_outputs, _ = tree_flatten(output)
        for t in flat_outputs:
            if torch.is_tensor(t) and t.requires_grad:
                t.register_hook(self._pre_backward)
        return output

    def _register_root_post_backward_final_callback(self):
        if self._state_ctx.post_backward_final_callback_queued:
            return
        self._state_ctx.post_backward_final_callback_queued = True
        Variable._execution_engine.queue_callback(self._root_post_backward_final_callback)
