# Adapted from microsoft/DeepSpeed deepspeed/runtime/zero/parameter_offload.py and
# partitioned_param_coordinator.py (pre-forward hook + fetch_sub_module prefetching)
import torch
import torch.distributed as dist


class PartitionedParameterCoordinator:
    def __init__(self, prefetch_bucket_size, group=None):
        self.prefetch_bucket_size = prefetch_bucket_size
        self.group = group
        self._prefetch_enabled = True
        self._inflight = {}

    def record_mode(self):
        self._prefetch_enabled = torch.is_grad_enabled()

    def fetch_sub_module(self, module, next_modules):
        for p in module.parameters(recurse=False):
            self._all_gather(p, async_op=False)
        if self._prefetch_enabled and self.prefetch_bucket_size > 0:
            for nxt in next_modules:
                for p in nxt.parameters(recurse=False):
                    self._inflight[id(p)] = self._all_gather(p, async_op=True)

    def _all_gather(self, p, async_op):
        full = torch.empty(p.ds_numel, dtype=p.dtype, device=p.device)
        return dist.all_gather_into_tensor(full, p.ds_tensor, group=self.group, async_op=async_op)


class DeepSpeedZeRoOffload:
    def __init__(self, module, coordinator):
        self.module = module
        self.coordinator = coordinator

    def _pre_forward_module_hook(self, module, *args):
        self.coordinator.record_mode()
        self.coordinator.fetch_sub_module(module, list(module.children())[:1])

    def _post_forward_module_hook(self, module, inputs, output):
        if torch.is_grad_enabled():
            for t in (output if isinstance(output, tuple) else (output,)):
                if torch.is_tensor(t) and t.requires_grad:
                    t.register_hook(lambda g, m=module: self._pre_backward(m, g))
        return output

    def _pre_backward(self, module, grad):
        self.coordinator.fetch_sub_module(module, [])
        return grad
