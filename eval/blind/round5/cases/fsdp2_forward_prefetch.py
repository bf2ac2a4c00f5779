"""Modelled on PyTorch torch/distributed/fsdp/_fully_shard/_fsdp_state.py and
_fsdp_param_group.py (FSDPState._pre_forward / FSDPParamGroup.pre_forward / post_forward)."""
from typing import Any, Dict, Tuple

import torch
import torch.nn as nn
from torch.distributed.fsdp._fully_shard._fsdp_common import TrainingState
from torch.utils._pytree import tree_flatten, tree_unflatten


class FSDPParamGroup:
    def __init__(self, fsdp_params, module, mesh_info, post_forward_mesh_info):
        self.fsdp_params = fsdp_params
        self.module = module
        self.mesh_info = mesh_info
        self.post_forward_mesh_info = post_forward_mesh_info
        self._training_state = TrainingState.IDLE
        self._module_fqn = None

    def pre_forward(self, module: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]):
        with torch.profiler.record_function(f"FSDP::pre_forward ({self._module_fqn})"):
            self._training_state = TrainingState.FORWARD
            self.unshard(self.unshard_async_op)
            self.wait_for_unshard()
            args, kwargs = self._register_post_backward_hook(args, kwargs)
            return args, kwargs

    def _register_post_backward_hook(self, args, kwargs):
        if not torch.is_grad_enabled():
            return args, kwargs
        args_list, args_spec = tree_flatten(args)
        kwargs_list, kwargs_spec = tree_flatten(kwargs)
        args_kwargs_list = list(args_list) + list(kwargs_list)
        inp_tensor_indices = [i for i, obj in enumerate(args_kwargs_list) if torch.is_tensor(obj)]
        inp_tensors = [args_kwargs_list[i] for i in inp_tensor_indices]
        inp_tensors = RegisterPostBackwardFunction.apply(self, *inp_tensors)
        for inp_tensor_idx, inp_tensor in zip(inp_tensor_indices, inp_tensors):
            args_kwargs_list[inp_tensor_idx] = inp_tensor
        args = tree_unflatten(args_kwargs_list[: len(args_list)], args_spec)
        kwargs = tree_unflatten(args_kwargs_list[len(args_list):], kwargs_spec)
        return args, kwargs


class FSDPState:
    def __init__(self):
        self._fsdp_param_group = None
        self._states_to_forward_prefetch = []

    def _pre_forward(self, module: nn.Module, args, kwargs):
        if self._training_state == TrainingState.PRE_BACKWARD:
            return args, kwargs
        self._training_state = TrainingState.FORWARD
        args, kwargs = self._root_pre_forward(module, args, kwargs)
        if self._fsdp_param_group:
            args, kwargs = self._fsdp_param_group.pre_forward(module, args, kwargs)
        # explicit forward prefetch: issue the next modules' all-gathers now
        if torch.is_grad_enabled():
            for fsdp_state in self._states_to_forward_prefetch:
                if (target_param_group := fsdp_state._fsdp_param_group) is not None:
                    FSDPParamGroup._prefetch_unshard(target_param_group, "forward")
        return args, kwargs


class RegisterPostBackwardFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, param_group: FSDPParamGroup, *inputs: torch.Tensor):
        ctx.param_group = param_group
        return inputs

    @staticmethod
    def backward(ctx, *grads: torch.Tensor):
        ctx.param_group.post_backward()
        return (None,) + grads
