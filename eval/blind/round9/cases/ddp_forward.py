import itertools
import logging

import torch
import torch.distributed as dist
from torch import _C
from torch.nn.modules import Module
from torch.utils._pytree import tree_flatten, tree_unflatten

logger = logging.getLogger(__name__)


def _find_tensors(obj):
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return itertools.chain.from_iterable(map(_find_tensors, obj))
    if isinstance(obj, dict):
        return itertools.chain.from_iterable(map(_find_tensors, obj.values()))
    return []


class DistributedDataParallel(Module):
    def __init__(self, module, process_group=None, broadcast_buffers=True,
                 find_unused_parameters=False, static_graph=False):
        super().__init__()
        self.module = module
        self.process_group = process_group or dist.group.WORLD
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.static_graph = static_graph
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self.modules_buffers = [b for b in module.buffers()]
        self.reducer = None
        self.logger = None
        self.num_iterations = 0
        self.buffer_hook = None

    def will_sync_module_buffers(self):
        return (
            self.require_forward_param_sync
            and self.broadcast_buffers
            and len(self.modules_buffers) > 0
        )

    def _check_sync_bufs_pre_fwd(self):
        return (
            self.will_sync_module_buffers()
            and _C.is_grad_enabled()
            and self.buffer_hook is None
        )

    def _sync_buffers(self):
        with torch.no_grad():
            handles = []
            for buf in self.modules_buffers:
                handles.append(dist.broadcast(buf, src=0, group=self.process_group, async_op=True))
            for h in handles:
                h.wait()

    def _pre_forward(self, *inputs, **kwargs):
        if torch.is_grad_enabled() and self.require_backward_grad_sync:
            assert self.logger is not None
            self.logger.set_runtime_stats_and_log()
            self.num_iterations += 1
            self.reducer.prepare_for_forward()

        if self._check_sync_bufs_pre_fwd():
            self._sync_buffers()
        return inputs, kwargs

    def _post_forward(self, output):
        if torch.is_grad_enabled() and self.require_backward_grad_sync:
            if self.find_unused_parameters and not self.static_graph:
                self.reducer.prepare_for_backward(list(_find_tensors(output)))
            else:
                self.reducer.prepare_for_backward([])
        return output

    def forward(self, *inputs, **kwargs):
        with torch.autograd.profiler.record_function("DistributedDataParallel.forward"):
            inputs, kwargs = self._pre_forward(*inputs, **kwargs)
            output = self.module(*inputs, **kwargs)
            return self._post_forward(output)
