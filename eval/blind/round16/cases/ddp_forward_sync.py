# adapted from pytorch/pytorch torch/nn/parallel/distributed.py
import logging

import torch
import torch.distributed as dist
from torch.distributed.algorithms.join import Join
from torch.nn.modules import Module
from torch.nn.parallel.distributed import _BufferCommHookLocation, _find_tensors
from torch.distributed.utils import _to_kwargs

logger = logging.getLogger(__name__)

_grad = torch.is_grad_enabled


class DistributedDataParallel(Module):
    def _pre_forward(self, *inputs, **kwargs):
        if not self._lazy_init_ran:
            self._lazy_init()
        if self._delay_all_reduce_all_params:
            return inputs, kwargs

        if torch.is_grad_enabled() and self.require_backward_grad_sync:
            assert self.logger is not None
            self.logger.set_runtime_stats_and_log()
            self.reducer.prepare_for_forward()

        # Notify the join context that this process has not joined, if needed
        work = Join.notify_join_context(self)
        if work:
            self.reducer._set_forward_pass_work_handle(work, self._divide_by_initial_world_size)

        # Calling _rebuild_buckets before forward computation; it may allocate
        # new buckets before deallocating old buckets.
        if torch.is_grad_enabled() and self.reducer._rebuild_buckets():
            logger.info("Reducer buckets have been rebuilt in this iteration.")
            self._has_rebuilt_buckets = True

        # sync params according to location (before/after forward) user
        # specified as part of hook, if hook was specified.
        if (sync := _grad()) and self._check_sync_bufs_pre_fwd():
            self._sync_buffers()

        if self._join_config.enable:
            self._check_global_requires_backward_grad_sync(is_joined_rank=False)

        if self.device_ids:
            moved_inputs, moved_kwargs = _to_kwargs(
                inputs,
                kwargs,
                torch.device(self.device_type, self.device_ids[0]),
                self.use_side_stream_for_tensor_copies,
            )
            inputs, kwargs = moved_inputs[0], moved_kwargs[0]
        return inputs, kwargs

    def _post_forward(self, output):
        if self._delay_all_reduce_all_params:
            self._clear_grad_buffer()
            return output

        if self._check_sync_bufs_post_fwd():
            self._sync_buffers()

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

    def _check_sync_bufs_pre_fwd(self):
        return self.will_sync_module_buffers() and (
            not hasattr(self, "buffer_hook")
            or self.buffer_hook.buffer_comm_hook_location == _BufferCommHookLocation.PRE_FORWARD
        )

    def _check_sync_bufs_post_fwd(self):
        return (
            self.will_sync_module_buffers()
            and hasattr(self, "buffer_hook")
            and self.buffer_hook.buffer_comm_hook_location == _BufferCommHookLocation.POST_FORWARD
        )

    def will_sync_module_buffers(self):
        return self.require_forward_param_sync and self.broadcast_buffers and len(self.modules_buffers) > 0

    def _sync_buffers(self):
        with torch.no_grad():
            authoritative_rank = self._find_common_rank(self._distributed_rank, False)
            self._distributed_broadcast_coalesced(
                self.modules_buffers, self.broadcast_bucket_size, authoritative_rank
            )

    def _distributed_broadcast_coalesced(self, tensors, buffer_size, authoritative_rank=0):
        dist._broadcast_coalesced(self.process_group, tensors, buffer_size, authoritative_rank)
