# Modeled on fairscale fairscale/nn/data_parallel/sharded_ddp.py
# (ShardedDataParallel.forward, sync_buffers, _clear_counters).
import torch
import torch.distributed as dist
from torch import nn


class ShardedDataParallel(nn.Module):
    def __init__(self, module: nn.Module, sharded_optimizer, process_group=None,
                 broadcast_buffers: bool = True, reduce_buffer_size: int = 2 ** 23):
        super().__init__()
        self._module = module
        self._sharded_optimizers = [sharded_optimizer]
        self._process_group = process_group if process_group is not None else dist.group.WORLD
        self._reference_global_rank = 0
        self._enable_broadcast_buffers = broadcast_buffers
        self._trainable_params = [p for p in module.parameters() if p.requires_grad]
        self._grad_to_be_reduced = [True for _ in self._trainable_params]
        self._bucket_flush_callback_set = False
        self._reduced_grads = 0
        self._work_handles = []

    def forward(self, *inputs, **kwargs):
        grad_active = torch.is_grad_enabled()
        if self._enable_broadcast_buffers and grad_active:
            self.sync_buffers(blocking=True)
        # Reset all the grad reduce and bucket state flags
        if grad_active:
            self._clear_counters()
        return self._module(*inputs, **kwargs)

    @torch.no_grad()
    def sync_buffers(self, blocking: bool = False):
        work_handles = []
        for buffer in self._module.buffers(recurse=True):
            work_handles.append(
                dist.broadcast(buffer.data, self._reference_global_rank, self._process_group, async_op=True)
            )
        if blocking and work_handles:
            for w in work_handles:
                w.wait()

    def _clear_counters(self) -> None:
        """Reset all the grad reduce and call counters"""
        self._grad_to_be_reduced = [True for _ in self._grad_to_be_reduced]
        self._bucket_flush_callback_set = False
        self._reduced_grads = 0
        self._work_handles.clear()
