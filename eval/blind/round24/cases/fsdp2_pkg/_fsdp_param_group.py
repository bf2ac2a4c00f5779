# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_state.py
from typing import Any

import torch
import torch.nn as nn


class FSDPCommContext:
    def __init__(self) -> None:
        self.all_gather_stream = None
        self.all_gather_copy_in_stream = None
        self.forward_grad = True

    def lazy_init(self, device: torch.device):
        self.all_gather_stream = torch.cuda.Stream(priority=-1)
        self.all_gather_copy_in_stream = torch.cuda.Stream(priority=-1)


class FSDPParamGroup:
    def __init__(self, comm_ctx: FSDPCommContext):
        self.comm_ctx = comm_ctx
        self.fsdp_params = []

    def _get_all_gather_streams(self):
        if self.comm_ctx.forward_grad:
            return (self.comm_ctx.all_gather_copy_in_stream, self.comm_ctx.all_gather_stream)
        current_stream = torch.cuda.current_stream()
        return current_stream, current_stream

    def unshard(self, async_op: bool = False):
        copy_in_stream, all_gather_stream = self._get_all_gather_streams()
        self._all_gather_result = self._foreach_all_gather(copy_in_stream, all_gather_stream, async_op)

    def pre_forward(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]):
        self.unshard()
        self.wait_for_unshard()
        if self.comm_ctx.forward_grad:
            args, kwargs = self._register_post_backward_hook(args, kwargs)
        return args, kwargs

    @staticmethod
    def _prefetch_unshard(target_fsdp_param_group: "FSDPParamGroup", pass_type: str) -> None:
        target_fsdp_param_group.unshard(async_op=True)
