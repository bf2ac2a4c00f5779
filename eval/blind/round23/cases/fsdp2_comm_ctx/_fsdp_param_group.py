# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_state.py
from typing import Any, Optional

import torch
import torch.nn as nn


class FSDPCommContext:
    """This has the communication state shared across FSDP states/parameter groups."""

    def lazy_init(self, device: torch.device):
        self.all_gather_copy_in_stream = torch.cuda.Stream(priority=-1)
        self.all_gather_stream = torch.cuda.Stream(priority=-1)
        self.all_gather_state = None
        self.grad_at_forward = True


class FSDPParamGroup:
    def __init__(self, fsdp_params, modules: tuple[nn.Module, ...], mesh_info, post_forward_mesh_info):
        self.fsdp_params = fsdp_params
        self.modules = modules
        self.mesh_info = mesh_info
        self.post_forward_mesh_info = post_forward_mesh_info
        self.comm_ctx: Optional[FSDPCommContext] = None
        self._all_gather_result = None

    def unshard(self, async_op: bool = False):
        if self._all_gather_result is not None:
            return
        self._all_gather_result = foreach_all_gather(
            self.fsdp_params,
            self.mesh_info.shard_process_group,
            async_op,
            *self._all_gather_streams(async_op),
        )

    def _all_gather_streams(self, async_op: bool):
        if async_op:
            return self.comm_ctx.all_gather_copy_in_stream, self.comm_ctx.all_gather_stream
        current_stream = torch.cuda.current_stream()
        return current_stream, current_stream

    def pre_forward(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]):
        with torch.profiler.record_function("FSDP::pre_forward"):
            overlap = self.comm_ctx is not None and self.comm_ctx.grad_at_forward
            self.unshard(async_op=overlap)
            self.wait_for_unshard()
            return args, kwargs

    def post_forward(self, module: nn.Module, input: Any, output: Any):
        with torch.profiler.record_function("FSDP::post_forward"):
            if self.post_forward_mesh_info is not None and self.comm_ctx.grad_at_forward:
                self.reshard()
            return output

    def wait_for_unshard(self):
        if self._all_gather_result is not None:
            foreach_all_gather_copy_out(self._all_gather_result, self.fsdp_params)

    def reshard(self):
        for fsdp_param in self.fsdp_params:
            fsdp_param.to_sharded()
        self._all_gather_result = None

    def pre_backward(self):
        self.unshard(async_op=True)
        self.wait_for_unshard()
