import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as _DDPBase


class DistributedDataParallel(_DDPBase):
    def _record_grad_mode(self, module, args, kwargs):
        self._fwd_grad_mode = torch.is_grad_enabled()
        return args, kwargs

    def _check_sync_bufs_pre_fwd(self):
        return (
            self.will_sync_module_buffers()
            and hasattr(self, "buffer_hook")
            and self.buffer_hook.buffer_comm_hook_location
            == _BufferCommHookLocation.PRE_FORWARD
        )

    def _pre_forward(self, *inputs, **kwargs):
        if self._delay_all_reduce_all_params:
            return inputs, kwargs

        if torch.is_grad_enabled() and self.require_backward_grad_sync:
            assert self.logger is not None
            self.logger.set_runtime_stats_and_log()
            self.reducer.prepare_for_forward()

        work = Join.notify_join_context(self)
        if work:
            self.reducer._set_forward_pass_work_handle(work, self._divide_by_initial_world_size)

        if self._fwd_grad_mode and self._check_sync_bufs_pre_fwd():
            self._sync_buffers()

        if self._join_config.enable:
            self._check_global_requires_backward_grad_sync(is_joined_rank=False)

        moved_inputs, moved_kwargs = _to_kwargs(inputs, kwargs, self.device_type, self.use_side_stream_for_tensor_copies)
        return moved_inputs[0], moved_kwargs[0]

    def forward(self, *inputs, **kwargs):
        with torch.autograd.profiler.record_function("DistributedDataParallel.forward"):
            self._record_grad_mode(self.module, inputs, kwargs)
            inputs, kwargs = self._pre_forward(*inputs, **kwargs)
            output = (
                self.module.forward(*inputs, **kwargs)
                if self._delay_all_reduce_all_params
                else self._run_ddp_forward(*inputs, **kwargs)
            )
            return self._post_forward(output)


class _BufferCommHookLocation:
    PRE_FORWARD = 0
    POST_FORWARD = 1


class Join:
    @staticmethod
    def notify_join_context(joinable):
        return None


def _to_kwargs(inputs, kwargs, device_type, use_side_stream):
    return [inputs], [kwargs]
