from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.nn as nn

from ._fsdp_param_group import FSDPParamGroup


class FSDPState:
    def __init__(self):
        self._fsdp_param_group: Optional[FSDPParamGroup] = None
        self._states_to_forward_prefetch: List["FSDPState"] = []
        self._is_root = None

    def _pre_forward(self, module: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]):
        fwd_opts = {
            "grad_enabled": torch.is_grad_enabled(),
            "forward_prefetch": [s._fsdp_param_group for s in self._states_to_forward_prefetch
                                 if s._fsdp_param_group is not None],
        }
        if self._fsdp_param_group:
            args, kwargs = self._fsdp_param_group.pre_forward(module, args, kwargs, **fwd_opts)
        return args, kwargs

    def _post_forward(self, module: nn.Module, input: Any, output: Any) -> Any:
        if self._fsdp_param_group:
            output = self._fsdp_param_group.post_forward(module, input, output)
        output = self._register_pre_backward_hook(output)
        return output

    def _register_pre_backward_hook(self, output: Any) -> Any:
        if not torch.is_grad_enabled():
            return output
        flat = output if isinstance(output, (list, tuple)) else [output]
        for t in flat:
            if torch.is_tensor(t) and t.requires_grad:
                t.register_hook(self._pre_backward)
        return output

    def _pre_backward(self, grad: torch.Tensor) -> torch.Tensor:
        if self._fsdp_param_group:
            self._fsdp_param_group.unshard(self._fsdp_param_group.unshard_async_op)
            self._fsdp_param_group.wait_for_unshard()
        return grad
