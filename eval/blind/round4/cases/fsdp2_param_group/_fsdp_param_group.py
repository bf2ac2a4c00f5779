from enum import Enum, auto
from typing import Any, Dict, List, Tuple

import torch
import torch.nn as nn


class TrainingState(Enum):
    IDLE = auto()
    FORWARD = auto()
    PRE_BACKWARD = auto()


class FSDPParamGroup:
    def __init__(self, fsdp_params, module: nn.Module, mesh_info, reshard_after_forward: bool = True,
                 unshard_async_op: bool = False):
        self.fsdp_params = fsdp_params
        self.module = module
        self.mesh_info = mesh_info
        self._reshard_after_forward = reshard_after_forward
        self.unshard_async_op = unshard_async_op
        self._training_state = TrainingState.IDLE
        self._fwd_grad_enabled = True
        self._all_gather_result = None

    def unshard(self, async_op: bool = False):
        from torch.distributed._composable.fsdp._fsdp_collectives import foreach_all_gather
        if self._all_gather_result is not None:
            return
        self._all_gather_result = foreach_all_gather(
            self.fsdp_params, self.mesh_info.shard_process_group, async_op,
            torch.cuda.current_stream(), torch.cuda.current_stream(), torch.device("cuda"),
        )

    def wait_for_unshard(self):
        if self._all_gather_result is not None:
            self._all_gather_result = None
            for p in self.fsdp_params:
                p.init_unsharded_param()

    @staticmethod
    def _prefetch_unshard(target: "FSDPParamGroup", pass_type: str) -> None:
        if target._training_state == TrainingState.IDLE:
            target.unshard(target.unshard_async_op)

    def pre_forward(self, module, args: Tuple[Any, ...], kwargs: Dict[str, Any], grad_enabled: bool = True,
                    forward_prefetch: List["FSDPParamGroup"] = ()):
        self._training_state = TrainingState.FORWARD
        self._fwd_grad_enabled = grad_enabled
        self.unshard(self.unshard_async_op and grad_enabled)
        self.wait_for_unshard()
        args, kwargs = self._register_post_backward_hook(args, kwargs)
        if grad_enabled:
            for target in forward_prefetch:
                FSDPParamGroup._prefetch_unshard(target, "forward")
        return args, kwargs

    def post_forward(self, module, input, output):
        # keeping params unsharded only saves an all-gather in the (absent) backward
        if self._reshard_after_forward or not self._fwd_grad_enabled:
            self.reshard()
        self._training_state = TrainingState.IDLE
        return output

    def reshard(self):
        for p in self.fsdp_params:
            p.to_sharded()

    def _register_post_backward_hook(self, args, kwargs):
        if not torch.is_grad_enabled():
            return args, kwargs
        args_list, kwargs_list = list(args), dict(kwargs)
        tensors = [t for t in args_list + list(kwargs_list.values()) if torch.is_tensor(t) and t.requires_grad]
        if tensors:
            torch.autograd.graph.register_multi_grad_hook(tensors, lambda *g: self.reshard())
        return tuple(args_list), kwargs_list
