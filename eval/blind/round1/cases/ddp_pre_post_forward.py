# mypy: allow-untyped-defs
"""Trimmed from torch/nn/parallel/distributed.py (DistributedDataParallel forward hooks)."""
import logging

import torch
import torch.distributed as dist
from torch.nn.parallel.distributed import _find_tensors, _BufferCommHookLocation
from torch.nn.modules import Module

logger = logging.getLogger(__name__)


class DistributedDataParallel(Module):

    def _check_sync_bufs_pre_fwd(self):
        return (
            self.will_sync_module_buffers()
            and hasattr(self, "buffer_hook")
            and self.buffer_hook.buffer_comm_hook_location == _BufferCommHookLocation.PRE_FORWARD
        )

    def will_sync_module_buffers(self):
        return self.require_forward_param_sync and self.broadcast_buffers and len(self.modules_buffers) > 0

    def _sync_buffers(self):
        with torch.no_grad():
            # module buffer sync
            if self._join_config.enable:
                authoritative_rank = self._find_common_rank(self._distributed_rank, True)
            else:
                authoritative_rank = 0
            self._distributed_broadcast_coalesced(
                self.modules_buffers, self.broadcast_bucket_size, authoritative_rank
            )

    def _pre_forward(self, *inputs, **kwargs):
        if not self._lazy_init_ran:
            self._lazy_init()

        if self._delay_all_reduce_all_params:
            return inputs, kwargs

        if torch.is_grad_enabled() and self.require_backward_grad_sync:
            assert self.logger is not None
            self.logger.set_runtime_stats_and_log()
            self.reducer.prepare_for_forward()

        # Calling _rebuild_buckets before forward computation. This should be called
        # only once during whole training period.
        if torch.is_grad_enabled() and self.reducer._rebuild_buckets():
            logger.info("Reducer buckets have been rebuilt in this iteration.")
            self._has_rebuilt_buckets = True

        # sync params according to location (before/after forward) user
        # specified as part of hook, if hook was specified.
        if torch.is_grad_enabled() and self._check_sync_bufs_pre_fwd():
            self._sync_buffers()

        return inputs, kwargs

    def _post_forward(self, output):
        if self._delay_all_reduce_all_params:
            self._clear_grad_buffer()
            return output

        if torch.is_grad_enabled() and self.require_backward_grad_sync:
            # We need to find any tensors in this object to figure out which
            # parameters were used during this forward pass, to ensure we short
            # circuit reduction for any unused parameters.
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
