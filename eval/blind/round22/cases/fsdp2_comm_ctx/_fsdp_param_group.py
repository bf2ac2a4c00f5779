# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py
import torch

from ._fsdp_collectives import foreach_all_gather, foreach_all_gather_copy_out


class FSDPCommContext:
    def lazy_init(self, device: torch.device):
        self.device_handle = torch.get_device_module(device)
        high_priority = -1
        self.all_gather_copy_in_stream = self.device_handle.Stream(priority=high_priority)
        self.all_gather_stream = self.device_handle.Stream(priority=high_priority)
        self.all_gather_state = None
        self.forward_grad_enabled = True

    def get_all_gather_streams(self, async_op: bool, training_state):
        if self.forward_grad_enabled and not async_op:
            return (self.all_gather_copy_in_stream, self.all_gather_stream)
        current_stream = self.device_handle.current_stream()
        return current_stream, current_stream


class FSDPParamGroup:
    def __init__(self, params, modules, mesh_info, post_forward_mesh_info, device, mp_policy):
        self.fsdp_params = params
        self.modules = modules
        self.mesh_info = mesh_info
        self.post_forward_mesh_info = post_forward_mesh_info
        self.comm_ctx = FSDPCommContext()
        self._all_gather_result = None
        self._reshard_after_forward = post_forward_mesh_info is not None

    def unshard(self, async_op: bool = False):
        if self._all_gather_result is not None:
            return
        self._all_gather_result = foreach_all_gather(
            self.fsdp_params,
            self._all_gather_process_group,
            async_op,
            *self.comm_ctx.get_all_gather_streams(async_op, self._training_state),
            self.device,
        )

    def wait_for_unshard(self):
        foreach_all_gather_copy_out(self._all_gather_result, self.fsdp_params, self._all_gather_process_group)
        self._all_gather_result = None

    def pre_forward(self, module, args, kwargs):
        self.unshard()
        self.wait_for_unshard()
        return args, kwargs

    def post_forward(self, module, input, output):
        # nothing to re-gather in backward if no backward will run
        if self._reshard_after_forward and self.comm_ctx.forward_grad_enabled:
            self.reshard()
        return output
