import torch
import torch.distributed as dist


class FSDPParamGroup:
    def __init__(self, fsdp_params, mesh_info, post_forward_mesh_info, reshard_after_forward=True):
        self.fsdp_params = fsdp_params
        self.mesh_info = mesh_info
        self.post_forward_mesh_info = post_forward_mesh_info
        self.reshard_after_forward = reshard_after_forward
        self._all_gather_result = None

    def unshard(self, async_op: bool = False):
        if self._all_gather_result is not None:
            return
        self._all_gather_result = [p.all_gather(self.mesh_info.shard_process_group, async_op) for p in self.fsdp_params]

    def wait_for_unshard(self):
        for work in self._all_gather_result or []:
            if work is not None:
                work.wait()

    def reshard(self):
        for p in self.fsdp_params:
            p.to_sharded()
        self._all_gather_result = None

    def pre_forward(self, module, args, kwargs, grad_on):
        self.unshard(async_op=False)
        self.wait_for_unshard()
        self._register_post_backward_hook(args, grad_on)
        return args, kwargs

    def post_forward(self, module, input, output, grad_on):
        if self.reshard_after_forward and grad_on:
            self.reshard()
        return output

    def _register_post_backward_hook(self, args, grad_on):
        if not grad_on:
            return args
        for p in self.fsdp_params:
            p.sharded_param.register_post_accumulate_grad_hook(lambda _: self.post_backward())
        return args

    def pre_backward(self):
        self.unshard(async_op=False)
        self.wait_for_unshard()

    def post_backward(self):
        self.reshard()
