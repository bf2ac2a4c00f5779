# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py
# mypy: allow-untyped-defs
import contextlib
import logging
from typing import Any, Callable, cast, NamedTuple, Optional

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import _get_device_handle
from torch.profiler import record_function
from torch.utils._pytree import tree_flatten, tree_unflatten

from ._fsdp_collectives import AllGatherResult, foreach_all_gather, foreach_all_gather_copy_out
from ._fsdp_common import compiled_autograd_enabled, FSDPMeshInfo, TrainingState
from ._fsdp_param import FSDPParam, ShardedState

logger = logging.getLogger("torch.distributed.fsdp.fully_shard")

# Bound once at import so the hot pre-forward path avoids an attribute lookup.
_grad_enabled = torch.is_grad_enabled


class FSDPCommContext:
    """This has the communication state shared across FSDP states/parameter groups."""

    def lazy_init(self, device: torch.device):
        self.device_handle = _get_device_handle(device.type)
        high_priority = -1
        self.all_gather_copy_in_stream = self.device_handle.Stream(priority=high_priority)
        self.all_gather_stream = self.device_handle.Stream(priority=high_priority)
        self.reduce_scatter_stream = self.device_handle.Stream(priority=high_priority)
        self.all_gather_state: Optional["AllGatherState"] = None
        # Post-forward order for explicit backward prefetching
        self.post_forward_order: list["FSDPParamGroup"] = []  # will cause ref cycles

    def get_all_gather_streams(
        self, async_op: bool, training_state: TrainingState
    ) -> tuple[torch.Stream, torch.Stream]:
        if not async_op and training_state in (
            TrainingState.FORWARD,
            TrainingState.PRE_BACKWARD,
        ):
            # Use separate streams for implicit prefetching
            return self.all_gather_copy_in_stream, self.all_gather_stream
        current_stream = self.device_handle.current_stream()
        return current_stream, current_stream


class AllGatherState(NamedTuple):
    all_gather_result: AllGatherResult
    event: Optional[torch.Event]  # all-gather copy-out


class FSDPParamGroup:
    """This class represents a parameter group to communicate together."""

    def __init__(self, params, modules, mesh_info: FSDPMeshInfo, device: torch.device):
        self.modules = modules
        self.fsdp_params = [FSDPParam(p, mesh_info, device) for p in params]
        self.mesh_info = mesh_info
        self.device = device
        self.device_handle = _get_device_handle(device.type)
        self._training_state = TrainingState.IDLE
        self._sharded_state = ShardedState.SHARDED
        self._module_fqn: Optional[str] = None
        self.comm_ctx = FSDPCommContext()
        self._post_forward_indices: list[int] = []
        # `async_op` arg used for pre-forward/pre-backward unshard; can be
        # overridden to only do explicit prefetching and avoid inter-stream
        # fragmentation from using separate unshard streams
        self.unshard_async_op: bool = False
        self._all_gather_result: Optional[AllGatherResult] = None

    # Runtime #
    def unshard(self, async_op: bool = False):
        if self._all_gather_result is not None:  # already called, pending wait
            return
        if self.is_unsharded:
            return  # no-op
        with record_function(self._with_fqn("FSDP::all_gather")):
            self._all_gather_result = foreach_all_gather(
                self.fsdp_params,
                self._all_gather_process_group,
                async_op,
                *self.comm_ctx.get_all_gather_streams(async_op, self._training_state),
                self.device,
            )

    def wait_for_unshard(self):
        if not self._all_gather_result:
            return  # no preceding unshard
        with record_function(self._with_fqn("FSDP::all_gather_copy_out")):
            foreach_all_gather_copy_out(self._all_gather_result, self.fsdp_params, self._all_gather_process_group)
        self._to_unsharded()
        self._all_gather_result = None

    def pre_forward(
        self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if not compiled_autograd_enabled():
            logger.debug("%s", self._with_fqn("FSDP::pre_forward"))
        with record_function(self._with_fqn("FSDP::pre_forward")):
            self._training_state = TrainingState.FORWARD
            # Only issue the unshard on the all-gather stream when a backward will follow
            async_op = self.unshard_async_op and _grad_enabled()
            self.unshard(async_op)
            self.wait_for_unshard()
            args, kwargs = self._register_post_backward_hook(args, kwargs)
            return args, kwargs

    def post_forward(self, module: nn.Module, input: Any, output: Any):
        if not compiled_autograd_enabled():
            logger.debug("%s", self._with_fqn("FSDP::post_forward"))
        with record_function(self._with_fqn("FSDP::post_forward")):
            self.reshard()
            self._record_post_forward()
            self._training_state = TrainingState.IDLE
            return output

    def _record_post_forward(self) -> None:
        # Since a group has one pre-backward unshard for each forward call
        # before the backward, we record each usage (with multiplicity)
        post_forward_index = len(self.comm_ctx.post_forward_order)
        if torch.is_grad_enabled():  # order is only consumed by explicit backward prefetching
            self.comm_ctx.post_forward_order.append(self)
            self._post_forward_indices.append(post_forward_index)

    def _register_post_backward_hook(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        # Traceable FSDP2 relies on `root_post_backward_callback` to call each
        # `FSDPParamGroup.post_backward`
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
            return args, kwargs  # no tensors that require gradients
        inp_tensors = RegisterPostBackwardFunction.apply(self, *inp_tensors)
        for inp_tensor_idx, inp_tensor in zip(inp_tensor_indices, inp_tensors):
            args_kwargs_list[inp_tensor_idx] = inp_tensor
        args_list = args_kwargs_list[: len(args_list)]
        kwargs_list = args_kwargs_list[len(args_list) :]
        args = tree_unflatten(args_list, args_spec)
        kwargs = tree_unflatten(kwargs_list, kwargs_spec)
        return args, kwargs

    def _with_fqn(self, label: str) -> str:
        if self._module_fqn:
            return f"{label} ({self._module_fqn})"
        return label


class RegisterPostBackwardFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, param_group: FSDPParamGroup, *inputs: torch.Tensor):
        ctx.param_group = param_group
        return inputs

    @staticmethod
    def backward(ctx, *grads: torch.Tensor):
        ctx.param_group.post_backward()
        return (None,) + grads
