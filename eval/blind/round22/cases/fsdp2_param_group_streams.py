# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py
import logging
from typing import Optional

import torch
import torch.nn as nn
from torch.distributed.device_mesh import _get_device_handle
from torch.profiler import record_function

from ._fsdp_collectives import AllGatherResult, DefaultAllGather, foreach_all_gather
from ._fsdp_common import TrainingState

logger = logging.getLogger("torch.distributed.fsdp.fully_shard")


class FSDPCommContext:
    """This has the communication state shared across FSDP states/parameter groups."""

    def lazy_init(self, device: torch.device):
        self.device_handle = _get_device_handle(device.type)
        high_priority = -1
        self.all_gather_copy_in_stream = self.device_handle.Stream(priority=high_priority)
        self.all_gather_stream = self.device_handle.Stream(priority=high_priority)
        self.all_gather_state = None

    def get_all_gather_streams(self, async_op: bool, training_state: TrainingState):
        if not async_op and training_state in (TrainingState.FORWARD, TrainingState.PRE_BACKWARD):
            # Use separate streams for implicit prefetching
            return self.all_gather_copy_in_stream, self.all_gather_stream
        current_stream = self.device_handle.current_stream()
        return current_stream, current_stream


class _AutogradAwareCommContext(FSDPCommContext):
    def get_all_gather_streams(self, async_op: bool, training_state: TrainingState):
        if torch.is_grad_enabled():
            return super().get_all_gather_streams(async_op, training_state)
        current_stream = self.device_handle.current_stream()
        return current_stream, current_stream


class FSDPParamGroup:
    def __init__(self, params, modules: tuple[nn.Module, ...], mesh_info, post_forward_mesh_info, device):
        self.modules = modules
        self.fsdp_params = params
        self.mesh_info = mesh_info
        self.device = device
        self._training_state = TrainingState.IDLE
        self.comm_ctx = _AutogradAwareCommContext()
        self.reduce_grads: bool = True
        self.unshard_async_op: bool = False
        self._all_gather_result: Optional[AllGatherResult] = None
        self._next_group: Optional["FSDPParamGroup"] = None
        self._all_gather_comm = DefaultAllGather()

    def unshard(self, async_op: bool = False):
        if self._all_gather_result is not None:  # already called, pending wait
            return
        with record_function("FSDP::all_gather"):
            self._all_gather_result = foreach_all_gather(
                self.fsdp_params,
                self._all_gather_process_group,
                async_op,
                *self.comm_ctx.get_all_gather_streams(async_op, self._training_state),
                self.device,
                self._all_gather_comm,
            )

    def pre_forward(self, module: nn.Module, args, kwargs):
        self._training_state = TrainingState.FORWARD
        # gradients are only reduced if a backward can follow this forward
        self.reduce_grads = self.reduce_grads and torch.is_grad_enabled()
        self.unshard(self.unshard_async_op)
        self.wait_for_unshard()
        target = self._next_group
        while target is not None and torch.is_grad_enabled():
            target.unshard(async_op=True)
            target = target._next_group
        return args, kwargs
