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

    def _pre_forward(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]):
        # shared by every param group of the root's tree
        self._comm_ctx.forward_grad = torch.is_grad_enabled()
        for fsdp_param_group in self._fsdp_param_groups:
            args, kwargs = fsdp_param_group.pre_forward(module, args, kwargs)
        for fsdp_state in self._states_to_forward_prefetch:
            for target_param_group in fsdp_state._fsdp_param_groups:
                FSDPParamGroup._prefetch_unshard(target_param_group, "forward")
        return args, kwargs
