# Adapted from microsoft/DeepSpeed deepspeed/runtime/zero/partitioned_param_coordinator.py
import torch
import torch.distributed as dist

from .base import GradAwareHookBase


class ZeroParamCoordinator(GradAwareHookBase):
    def __init__(self, group, max_prefetch=2):
        self.group = group
        self.max_prefetch = max_prefetch
        self._handles = []

    def _gather(self, p, async_op):
        full = torch.empty(p.ds_numel, dtype=p.dtype, device=p.device)
        return dist.all_gather_into_tensor(full, p.ds_tensor, group=self.group, async_op=async_op)

    def fetch(self, module, upcoming):
        for p in module.parameters(recurse=False):
            self._gather(p, async_op=False)
        n_prefetch = self.max_prefetch if self._is_grad_pass() else 0
        for m in upcoming[:n_prefetch]:
            for p in m.parameters(recurse=False):
                self._handles.append(self._gather(p, async_op=True))

    def post_forward(self, module, inputs, output):
        if self._is_grad_pass():
            output = self._register_backward_hooks(module, output)
        return output
