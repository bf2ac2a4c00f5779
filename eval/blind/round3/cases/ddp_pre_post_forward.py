# Modelled on torch/nn/parallel/distributed.py DistributedDataParallel (PyTorch 2.2-2.5).
import logging

import torch
from torch.distributed.algorithms.join import Join
from torch.nn.parallel.distributed import _BufferCommHookLocation, _find_tensors
from torch.utils._pytree import tree_flatten

logger = logging.getLogger(__name__)


class DistributedDataParallelForwardMixin:
    def will_sync_module_buffers(self):
        return self.require_forward_param_sync and self.broadcast_buffers and len(self.modules_buffers) > 0

    def _check_sync_bufs_pre_fwd(self):
        return (
            self.will_sync_module_buffers()
            and hasattr(self, "buffer_hook")
            and self.buffer_hook.buffer_comm_hook_location == _BufferCommHookLocation.PRE_FORWARD
        )

    def _pre_forward(self, *inputs, **kwargs):
        if self._use_python_reducer:
            return inputs, kwargs
        if not self._lazy_init_ran and not torch.compiler.is_compiling():
            self._lazy_init()
        if self._delay_all_reduce_all_params:
            return inputs, kwargs

        if torch.is_grad_enabled() and self.require_backward_grad_sync:
            assert self.logger is not None
            self.logger.set_runtime_stats_and_log()
            self.reducer.prepare_for_forward()

        work = Join.notify_join_context(self)
        if work:
            self.reducer._set_forward_pass_work_handle(work, self._divide_by_initial_world_size)

        if torch.is_grad_enabled() and self.reducer._rebuild_buckets():
            logger.info("Reducer buckets have been rebuilt in this iteration.")
            self._has_rebuilt_buckets = True

        sync_buffers_now = self._check_sync_bufs_pre_fwd() and torch.is_grad_enabled()
        if sync_buffers_now:
            self._sync_buffers()

        if self._join_config.enable:
            self._check_global_requires_backward_grad_sync(is_joined_rank=False)

        if self.device_ids:
            moved_inputs, moved_kwargs = self._to_kwargs(inputs, kwargs, torch.device(self.device_type, self.device_ids[0]), self.use_side_stream_for_tensor_copies)
            args, kwargs = moved_inputs[0], moved_kwargs[0]
            return args, kwargs
        return inputs, kwargs

    def _post_forward(self, output):
        if self._use_python_reducer:
            return output
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

        output_tensor_list, treespec = tree_flatten(output)
        return output
