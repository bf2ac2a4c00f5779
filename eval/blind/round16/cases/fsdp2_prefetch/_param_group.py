# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py
from typing import Any, NamedTuple, Optional

import torch
from torch.distributed.device_mesh import _get_device_handle
from torch.profiler import record_function

from ._common import TrainingState


class AllGatherState(NamedTuple):
    all_gather_result: Any
    event: Optional[torch.Event]


class FSDPCommContext:
    """This has the communication state shared across FSDP states/parameter groups."""

    grad_hint: bool = True

    def lazy_init(self, device: torch.device):
        self.device_handle = _get_device_handle(device.type)
        high_priority = -1
        self.all_gather_copy_in_stream = self.device_handle.Stream(priority=high_priority)
        self.all_gather_stream = self.device_handle.Stream(priority=high_priority)
        self.reduce_scatter_stream = self.device_handle.Stream(priority=high_priority)
        self.all_gather_state: Optional[AllGatherState] = None

    def get_all_gather_streams(self, async_op: bool, training_state: TrainingState):
        if self.grad_hint and not async_op and training_state in (
            TrainingState.FORWARD,
            TrainingState.PRE_BACKWARD,
        ):
            # Use separate streams for implicit prefetching
            return self.all_gather_copy_in_stream, self.all_gather_stream
        current_stream = self.device_handle.current_stream()
        return current_stream, current_stream


class FSDPParamGroup:
    """This class represents a parameter group to communicate together."""

    def __init__(self, fsdp_params, mesh_info, post_forward_mesh_info, device, all_gather_comm, process_group):
        self.fsdp_params = fsdp_params
        self.mesh_info = mesh_info
        self.post_forward_mesh_info = post_forward_mesh_info
        self.device = device
        self.comm_ctx = FSDPCommContext()
        self._training_state = TrainingState.IDLE
        self._all_gather_result = None
        self._all_gather_comm = all_gather_comm
        self._all_gather_process_group = process_group
        self.unshard_async_op: bool = False
        self.is_unsharded = False

    def unshard(self, async_op: bool = False):
        if self._all_gather_result is not None or self.is_unsharded:
            return
        from torch.distributed.fsdp._fully_shard._fsdp_collectives import foreach_all_gather

        with record_function("FSDP::all_gather"):
            self._all_gather_result = foreach_all_gather(
                self.fsdp_params,
                self._all_gather_process_group,
                async_op,
                *self.comm_ctx.get_all_gather_streams(async_op, self._training_state),
                self.device,
                self._all_gather_comm,
            )

    def wait_for_unshard(self):
        if not self._all_gather_result:
            return
        self.is_unsharded = True
        self._all_gather_result = None

    def pre_forward(self, module, args, kwargs):
        self._training_state = TrainingState.FORWARD
        self.unshard(self.unshard_async_op)
        self.wait_for_unshard()
        return args, kwargs

    def post_forward(self, module, input, output):
        # a no-grad forward will not come back for these parameters in backward,
        # so always free them
        if self.post_forward_mesh_info is not None or not self.comm_ctx.grad_hint:
            self.reshard()
        self._training_state = TrainingState.IDLE
        return output

    def pre_backward(self):
        self._training_state = TrainingState.PRE_BACKWARD
        self.unshard(self.unshard_async_op)
        self.wait_for_unshard()

    def reshard(self):
        for fsdp_param in self.fsdp_params:
            fsdp_param.to_sharded()
        self.is_unsharded = False

    @staticmethod
    def _prefetch_unshard(target_fsdp_param_group: "FSDPParamGroup", pass_type: str) -> None:
        with record_function(f"FSDP::{pass_type}_prefetch"):
            target_fsdp_param_group.unshard(True)
