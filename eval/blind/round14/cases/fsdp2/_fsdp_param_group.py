# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py
import contextlib
import logging
from typing import Any, NamedTuple, Optional

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.autograd.graph import _MultiHandle
from torch.profiler import record_function

from ._fsdp_collectives import foreach_all_gather, foreach_all_gather_copy_out
from ._fsdp_common import FSDPMeshInfo, TrainingState, compiled_autograd_enabled

logger = logging.getLogger("torch.distributed.fsdp.fully_shard")


class AllGatherState(NamedTuple):
    all_gather_result: Any
    event: Optional[torch.Event]


class FSDPCommContext:
    """This has the communication state shared across FSDP states/parameter groups."""

    def lazy_init(self, device: torch.device):
        self.device_handle = torch.get_device_module(device)
        high_priority = -1
        self.all_gather_copy_in_stream = self.device_handle.Stream(priority=high_priority)
        self.all_gather_stream = self.device_handle.Stream(priority=high_priority)
        self.reduce_scatter_stream = self.device_handle.Stream(priority=high_priority)
        self.all_gather_state: Optional[AllGatherState] = None
        self.overlap_copy_out: bool = True
        self.post_forward_order: list["FSDPParamGroup"] = []

    def get_all_gather_streams(self, async_op: bool, training_state: TrainingState):
        if not async_op and training_state in (TrainingState.FORWARD, TrainingState.PRE_BACKWARD):
            return self.all_gather_copy_in_stream, self.all_gather_stream
        current_stream = self.device_handle.current_stream()
        return current_stream, current_stream


class FSDPParamGroup:
    """This class represents a parameter group to communicate together."""

    def __init__(self, params, modules, mesh_info: FSDPMeshInfo, post_forward_mesh_info: Optional[FSDPMeshInfo],
                 device: torch.device):
        self.modules = modules
        self.fsdp_params = params
        self.mesh_info = mesh_info
        self.post_forward_mesh_info = post_forward_mesh_info
        self.device = device
        self.device_handle = torch.get_device_module(device)
        self._training_state = TrainingState.IDLE
        self._all_gather_result = None
        self._reshard_after_forward_event = None
        self._post_forward_indices: list[int] = []
        self.unshard_async_op = False
        self._module_fqn: Optional[str] = None
        self.comm_ctx = FSDPCommContext()

    @property
    def _reshard_after_forward(self) -> bool:
        return self.post_forward_mesh_info is not None

    @property
    def _use_post_forward_mesh(self) -> bool:
        return self.post_forward_mesh_info is not None and torch.is_grad_enabled()

    @property
    def _all_gather_process_group(self) -> dist.ProcessGroup:
        mesh_info = self.post_forward_mesh_info if self.is_sharded_post_forward else self.mesh_info
        return mesh_info.shard_process_group

    def unshard(self, async_op: bool = False):
        if self._all_gather_result is not None:  # already called, pending wait
            return
        if self.is_unsharded:
            return  # no-op
        if self._reshard_after_forward_event is not None:
            self._wait_all_gather_streams_on_event(self._reshard_after_forward_event)
            self._reshard_after_forward_event = None
        with record_function(self._with_fqn("FSDP::all_gather")):
            self._all_gather_result = foreach_all_gather(
                self.fsdp_params,
                self._all_gather_process_group,
                async_op,
                *self.comm_ctx.get_all_gather_streams(async_op, self._training_state),
                self.device,
            )

    def wait_for_unshard(self):
        """
        1. In forward with implicit prefetching, to overlap the current copy-out
        with the next all-gather, we save a reference to the current all-gather
        result to free after the next copy-out.
        2. Otherwise (explicit prefetching or in backward), we free the
        all-gather result immediately after the current copy-out since we can
        already overlap the current copy-out with the previous reduce-scatter.
        """
        if not self._all_gather_result:
            return  # no preceding unshard
        async_op = self._all_gather_result.all_gather_work is not None
        if self._training_state == TrainingState.FORWARD:  # implicit prefetch
            if prev_all_gather_state := self.comm_ctx.all_gather_state:
                self._wait_all_gather_streams_on_event(prev_all_gather_state.event)
                self.comm_ctx.all_gather_state = None  # free the all-gather result
        with record_function(self._with_fqn("FSDP::all_gather_copy_out")):
            foreach_all_gather_copy_out(self._all_gather_result, self.fsdp_params, self._all_gather_process_group)
        for fsdp_param in self.fsdp_params:
            fsdp_param.init_unsharded_param()
        self._to_unsharded()
        all_gather_copy_out_event = self.device_handle.Event()
        all_gather_copy_out_event.record()
        if not async_op and self._training_state == TrainingState.FORWARD and self.comm_ctx.overlap_copy_out:
            # Defer free to allow for overlap of this copy-out with next
            # all-gather collective
            self.comm_ctx.all_gather_state = AllGatherState(self._all_gather_result, all_gather_copy_out_event)
        else:
            self._wait_all_gather_streams_on_event(all_gather_copy_out_event)
        self._all_gather_result = None  # free unless saved in `all_gather_state`

    def _wait_all_gather_streams_on_event(self, event: Optional[torch.Event]):
        if hasattr(self.comm_ctx, "all_gather_copy_in_stream") and event is not None:
            self.comm_ctx.all_gather_copy_in_stream.wait_event(event)
        if hasattr(self.comm_ctx, "all_gather_stream") and event is not None:
            self.comm_ctx.all_gather_stream.wait_event(event)

    def reshard(self):
        if self._training_state == TrainingState.FORWARD:
            if not self._reshard_after_forward:
                return
            if self._use_post_forward_mesh:
                self._to_sharded_post_forward()
                self._reshard_after_forward_event = self.device_handle.Event()
                if self._reshard_after_forward_event is not None:
                    self._reshard_after_forward_event.record()
                return
        self._to_sharded()

    def pre_forward(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]):
        if not torch.compiler.is_compiling():
            logger.debug("%s", self._with_fqn("FSDP::pre_forward"))
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
            self._training_state = TrainingState.IDLE
            return output

    def _record_post_forward(self) -> None:
        post_forward_index = len(self.comm_ctx.post_forward_order)
        self.comm_ctx.post_forward_order.append(self)
        self._post_forward_indices.append(post_forward_index)

    @staticmethod
    def _prefetch_unshard(target_fsdp_param_group: "FSDPParamGroup", pass_type: str) -> None:
        if pass_type == "backward":
            training_state = TrainingState.PRE_BACKWARD
        elif pass_type == "forward":
            training_state = TrainingState.FORWARD
        else:
            raise ValueError(f"Unknown pass type: {pass_type}")
        target_fqn = target_fsdp_param_group._module_fqn
        with (
            record_function(f"FSDP::{pass_type}_prefetch for {target_fqn}"),
            target_fsdp_param_group.use_training_state(training_state),
        ):
            async_op = target_fsdp_param_group.unshard_async_op
            target_fsdp_param_group.unshard(async_op)

    def _register_post_backward_hook(self, args: tuple[Any, ...], kwargs: dict[str, Any]):
        if not torch.is_grad_enabled():
            return args, kwargs
        args_list, args_spec = torch.utils._pytree.tree_flatten(args)
        kwargs_list, kwargs_spec = torch.utils._pytree.tree_flatten(kwargs)
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
        args = torch.utils._pytree.tree_unflatten(args_list, args_spec)
        kwargs = torch.utils._pytree.tree_unflatten(kwargs_list, kwargs_spec)
        return args, kwargs

    @contextlib.contextmanager
    def use_training_state(self, training_state: TrainingState):
        old_training_state = self._training_state
        self._training_state = training_state
        try:
            yield
        finally:
            self._training_state = old_training_state

    # Utilities #
    def _to_sharded(self):
        for fsdp_param in self.fsdp_params:
            fsdp_param.to_sharded()

    def _to_sharded_post_forward(self):
        for fsdp_param in self.fsdp_params:
            fsdp_param.to_sharded_post_forward()

    def _to_unsharded(self):
        for fsdp_param in self.fsdp_params:
            fsdp_param.to_unsharded()

    @property
    def is_unsharded(self) -> bool:
        return all(p.is_unsharded for p in self.fsdp_params)

    @property
    def is_sharded_post_forward(self) -> bool:
        return all(p.is_sharded_post_forward for p in self.fsdp_params)

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
