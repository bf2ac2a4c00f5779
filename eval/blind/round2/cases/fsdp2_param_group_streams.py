# Modelled on PyTorch torch/distributed/_composable/fsdp/_fsdp_param_group.py and _fsdp_state.py (FSDP2)
import functools
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.utils._pytree import tree_flatten, tree_unflatten

from torch.distributed._composable.fsdp._fsdp_collectives import (
    foreach_all_gather,
    foreach_all_gather_copy_out,
)
from torch.distributed._composable.fsdp._fsdp_common import TrainingState


class FSDPCommContext:
    """This has the communication state shared across FSDP states/parameter groups."""

    def lazy_init(self):
        high_priority = -1
        self.all_gather_copy_in_stream = torch.cuda.Stream(priority=high_priority)
        self.all_gather_stream = torch.cuda.Stream(priority=high_priority)
        self.reduce_scatter_stream = torch.cuda.Stream(priority=high_priority)
        self.all_gather_state = None
        self.post_forward_order: List["FSDPParamGroup"] = []

    def get_all_gather_streams(self, training_state: TrainingState) -> Tuple[torch.cuda.Stream, torch.cuda.Stream]:
        if training_state in (TrainingState.FORWARD, TrainingState.PRE_BACKWARD) and torch.is_grad_enabled():
            # Use separate streams for implicit prefetching
            return self.all_gather_copy_in_stream, self.all_gather_stream
        current_stream = torch.cuda.current_stream()
        return current_stream, current_stream


class FSDPParamGroup:
    def unshard(self, async_op: bool = False):
        if self._all_gather_result is not None or self.is_unsharded:
            return
        self._all_gather_result = foreach_all_gather(
            self.fsdp_params,
            self._all_gather_process_group,
            async_op,
            *self.comm_ctx.get_all_gather_streams(self._training_state),
            self.device,
        )

    def wait_for_unshard(self):
        if not self._all_gather_result:
            return
        foreach_all_gather_copy_out(self._all_gather_result, self.fsdp_params, self._all_gather_process_group)
        self._to_unsharded()
        self._all_gather_result = None

    def pre_forward(self, module: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]):
        with torch.profiler.record_function("FSDP::pre_forward"):
            self._training_state = TrainingState.FORWARD
            self.unshard()
            self.wait_for_unshard()
            args, kwargs = self._register_post_backward_hook(args, kwargs)
            return args, kwargs

    def _register_post_backward_hook(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]):
        if not torch.is_grad_enabled():
            return args, kwargs
        args_list, args_spec = tree_flatten(args)
        kwargs_list, kwargs_spec = tree_flatten(kwargs)
        args_kwargs_list = list(args_list) + list(kwargs_list)
        inp_tensor_indices = [i for i, obj in enumerate(args_kwargs_list) if torch.is_tensor(obj) and obj.requires_grad]
        if not inp_tensor_indices:
            return args, kwargs
        inp_tensors = RegisterPostBackwardFunction.apply(self, *[args_kwargs_list[i] for i in inp_tensor_indices])
        for idx, t in zip(inp_tensor_indices, inp_tensors):
            args_kwargs_list[idx] = t
        args = tree_unflatten(args_kwargs_list[: len(args_list)], args_spec)
        kwargs = tree_unflatten(args_kwargs_list[len(args_list):], kwargs_spec)
        return args, kwargs

    @staticmethod
    def _prefetch_unshard(target_fsdp_param_group: "FSDPParamGroup", pass_type: str) -> None:
        training_state = TrainingState.FORWARD if pass_type == "forward" else TrainingState.PRE_BACKWARD
        with torch.profiler.record_function(f"FSDP::{pass_type}_prefetch"):
            with target_fsdp_param_group.use_training_state(training_state):
                target_fsdp_param_group.unshard()


class RegisterPostBackwardFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, param_group: FSDPParamGroup, *inputs: torch.Tensor):
        ctx.param_group = param_group
        return inputs

    @staticmethod
    def backward(ctx, *grads: torch.Tensor):
        ctx.param_group.post_backward()
        return (None,) + grads


class FSDPState:
    def _pre_forward(self, module: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]):
        if self._training_state == TrainingState.PRE_BACKWARD:
            return args, kwargs
        self._training_state = TrainingState.FORWARD
        args, kwargs = self._root_pre_forward(module, args, kwargs)
        if self._fsdp_param_group:
            args, kwargs = self._fsdp_param_group.pre_forward(module, args, kwargs)
        prefetch_allowed = torch.is_grad_enabled()
        for fsdp_state in self._states_to_forward_prefetch:
            if (target_param_group := fsdp_state._fsdp_param_group) is not None and prefetch_allowed:
                FSDPParamGroup._prefetch_unshard(target_param_group, "forward")
        return args, kwargs

    def _register_pre_backward_hook(self, output: Any) -> Any:
        if not torch.is_grad_enabled():
            return output
        flat_outputs, _ = tree_flatten(output)
        for t in flat_outputs:
            if torch.is_tensor(t) and t.requires_grad:
                t.register_hook(self._pre_backward)
        return output
