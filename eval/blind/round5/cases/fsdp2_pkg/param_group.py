from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.nn as nn

from .comm import foreach_all_gather, foreach_all_gather_copy_out


class FSDPCommContext:
    def __init__(self):
        self.forward_grad = True
        self.all_gather_copy_in_stream = torch.cuda.Stream(priority=-1)
        self.all_gather_stream = torch.cuda.Stream(priority=-1)
        self.reduce_scatter_stream = torch.cuda.Stream(priority=-1)


class FSDPParamGroup:
    def __init__(self, fsdp_params, mesh_info, device):
        self.fsdp_params = fsdp_params
        self.mesh_info = mesh_info
        self.device = device
        self.comm_ctx: Optional[FSDPCommContext] = None
        self._all_gather_result = None
        self.next_param_groups: List["FSDPParamGroup"] = []

    def unshard(self, overlap: bool = True):
        if self._all_gather_result is not None:
            return
        self._all_gather_result = foreach_all_gather(
            self.fsdp_params,
            self.mesh_info.shard_process_group,
            overlap,
            self.comm_ctx.all_gather_copy_in_stream,
            self.comm_ctx.all_gather_stream,
            self.device,
        )

    def wait_for_unshard(self):
        if self._all_gather_result is None:
            return
        foreach_all_gather_copy_out(self._all_gather_result, self.fsdp_params, self.mesh_info.shard_process_group)
        self._all_gather_result = None

    def pre_forward(self, module: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]):
        grad_on = self.comm_ctx.forward_grad
        self.unshard(overlap=grad_on)
        self.wait_for_unshard()
        if grad_on:
            for group in self.next_param_groups:
                group.unshard(overlap=True)
        return args, kwargs

    def post_forward(self, module: nn.Module, input: Any, output: Any):
        if not self.comm_ctx.forward_grad:
            return output
        for fsdp_param in self.fsdp_params:
            if fsdp_param.sharded_param.requires_grad:
                fsdp_param.unsharded_param.register_post_accumulate_grad_hook(self._post_backward_hook)
        return output

    def _post_backward_hook(self, param):
        pass
