from typing import Any, Dict, Tuple

import torch
import torch.nn as nn
from torch.utils._pytree import tree_flatten, tree_map

from ._fsdp_param_group import FSDPParamGroup


def _cast_fp_tensor(dtype: torch.dtype, x):
    if not isinstance(x, torch.Tensor) or not torch.is_floating_point(x) or x.dtype == dtype:
        return x
    return x.to(dtype)


class FSDPState:
    def __init__(self, mp_policy, fsdp_param_group: FSDPParamGroup = None):
        self._mp_policy = mp_policy
        self._fsdp_param_group = fsdp_param_group
        self._grad_on = True
        self._states_to_forward_prefetch = []

    def _root_pre_forward(self, module: nn.Module, args, kwargs):
        self._grad_on = torch.is_grad_enabled()
        return args, kwargs

    def _pre_forward(self, module: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]):
        args, kwargs = self._root_pre_forward(module, args, kwargs)
        if self._mp_policy.cast_forward_inputs and self._mp_policy.param_dtype and self._grad_on:
            cast_fn = lambda x: _cast_fp_tensor(self._mp_policy.param_dtype, x)
            args, kwargs = tree_map(cast_fn, args), tree_map(cast_fn, kwargs)
        if self._fsdp_param_group:
            args, kwargs = self._fsdp_param_group.pre_forward(module, args, kwargs, self._grad_on)
        return args, kwargs

    def _post_forward(self, module: nn.Module, input: Any, output: Any) -> Any:
        if self._fsdp_param_group:
            output = self._fsdp_param_group.post_forward(module, input, output, self._grad_on)
        output = self._register_pre_backward_hook(output)
        return output

    def _register_pre_backward_hook(self, output: Any) -> Any:
        if not torch.is_grad_enabled():
            return output
        flat_outputs, _ = tree_flatten(output)
        for t in flat_outputs:
            if torch.is_tensor(t) and t.requires_grad:
                t.register_hook(self._pre_backward)
        return output

    def _pre_backward(self, grad: torch.Tensor) -> torch.Tensor:
        if self._fsdp_param_group:
            self._fsdp_param_group.pre_backward()
        return grad
