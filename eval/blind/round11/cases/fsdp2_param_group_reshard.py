# Adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py
# (FSDPParamGroup.pre_forward / post_forward / reshard / _register_post_backward_hook).
from typing import Any

import torch
import torch.nn as nn
from torch.profiler import record_function
from torch.utils._pytree import tree_flatten, tree_unflatten

from torch.distributed.fsdp._fully_shard._fsdp_common import TrainingState
from torch.distributed.fsdp._fully_shard._fsdp_param_group import RegisterPostBackwardFunction


class FSDPParamGroup:
    def reshard(self):
        if self._training_state == TrainingState.FORWARD:
            if not self._reshard_after_forward or not torch.is_grad_enabled():
                return
            if self._use_post_forward_mesh:
                self._to_sharded_post_forward()
                self._reshard_after_forward_event = self.device_handle.Event()
                self._reshard_after_forward_event.record()
                return
        self._to_sharded()

    def pre_forward(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]):
        with record_function(self._with_fqn("FSDP::pre_forward")):
            self._training_state = TrainingState.FORWARD
            self.unshard(self.unshard_async_op)
            self.wait_for_unshard()
            args, kwargs = self._register_post_backward_hook(args, kwargs)
            return args, kwargs

    def post_forward(self, module: nn.Module, input: Any, output: Any):
        with record_function(self._with_fqn("FSDP::post_forward")):
            self.reshard()
            self._record_post_forward()
            if self._forward_prefetch_targets and torch.is_grad_enabled():
                for target in self._forward_prefetch_targets:
                    self._prefetch_unshard(target, "forward")
            self._training_state = TrainingState.IDLE
            return output

    def _register_post_backward_hook(self, args: tuple[Any, ...], kwargs: dict[str, Any]):
        if not torch.is_grad_enabled():
            return args, kwargs
        args_list, args_spec = tree_flatten(args)
        kwargs_list, kwargs_spec = tree_flatten(kwargs)
        args_kwargs_list = list(args_list) + list(kwargs_list)
        inp_tensor_indices: list[int] = []
        inp_tensors: list[torch.Tensor] = []
        for i, obj in enumerate(args_kwargs_list):
            if torch.is_tensor(obj) and obj.requires_grad:
                inp_tensor_indices.append(i)
                inp_tensors.append(obj)
        if len(inp_tensors) == 0:
            return args, kwargs
        inp_tensors = RegisterPostBackwardFunction.apply(self, *inp_tensors)
        for inp_tensor_idx, inp_tensor in zip(inp_tensor_indices, inp_tensors):
            args_kwargs_list[inp_tensor_idx] = inp_tensor
        args_list = args_kwargs_list[: len(args_list)]
        kwargs_list = args_kwargs_list[len(args_list):]
        args = tree_unflatten(args_list, args_spec)
        kwargs = tree_unflatten(kwargs_list, kwargs_spec)
        return args, kwargs
