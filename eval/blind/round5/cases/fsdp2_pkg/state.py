from typing import Any, Dict, Tuple

import torch
import torch.nn as nn

from .param_group import FSDPCommContext, FSDPParamGroup


class FSDPState:
    def __init__(self, module: nn.Module, param_group: FSDPParamGroup):
        self._comm_ctx = FSDPCommContext()
        self._fsdp_param_group = param_group
        param_group.comm_ctx = self._comm_ctx

        def _make_pre_forward():
            def _pre_forward_hook(mod: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]):
                # snapshot autograd state once per root forward
                self._comm_ctx.forward_grad = torch.is_grad_enabled()
                return self._fsdp_param_group.pre_forward(mod, args, kwargs)

            return _pre_forward_hook

        module.register_forward_pre_hook(_make_pre_forward(), prepend=True, with_kwargs=True)
        module.register_forward_hook(self._post_forward, prepend=False)

    def _post_forward(self, module, input, output):
        self._fsdp_param_group.post_forward(module, input, output)
        return output
