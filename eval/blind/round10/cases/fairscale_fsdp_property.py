# Adapted from facebookresearch/fairscale fairscale/nn/data_parallel/fully_sharded_data_parallel.py
# (forward, _rebuild_full_params, _register_pre_backward_hooks)
import torch
import torch.distributed as dist


class FullyShardedDataParallel(torch.nn.Module):
    def __init__(self, module, process_group, reshard_after_forward=True):
        super().__init__()
        self.module = module
        self.process_group = process_group
        self.reshard_after_forward = reshard_after_forward
        self._pending = []

    @property
    def _in_grad_pass(self) -> bool:
        return torch.is_grad_enabled()

    def _rebuild_full_params(self):
        for p in self.module.parameters():
            full = torch.empty(p._full_numel, dtype=p.dtype, device=p.device)
            if self._in_grad_pass:
                self._pending.append(dist.all_gather_into_tensor(full, p.data, group=self.process_group, async_op=True))
            else:
                dist.all_gather_into_tensor(full, p.data, group=self.process_group)
            p._full_param = full

    def forward(self, *args, **kwargs):
        self._rebuild_full_params()
        for w in self._pending:
            w.wait()
        self._pending.clear()
        outputs = self.module(*args, **kwargs)
        if self.reshard_after_forward:
            for p in self.module.parameters():
                p._full_param = None
        return self._register_pre_backward_hooks(outputs)

    def _register_pre_backward_hooks(self, outputs):
        if not torch.is_grad_enabled():
            return outputs
        if torch.is_tensor(outputs) and outputs.requires_grad:
            outputs.register_hook(self._pre_backward_hook)
        return outputs

    def _pre_backward_hook(self, grad):
        self._rebuild_full_params()
        return grad
