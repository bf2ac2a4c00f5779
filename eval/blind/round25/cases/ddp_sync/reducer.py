# adapted from Ace1928/eidosian_forge archive_forge/code/func__delayed_all_reduce_hook.py
import functools

import torch.distributed as dist


def _delayed_all_reduce_hook(self, grad):
    world_size = dist.get_world_size(self.process_group)
    self._delay_grad_buffer.div_(world_size)
    _ = dist.all_reduce(self._delay_grad_buffer, group=self.process_group, async_op=True)
    return grad


class ReducerState:
    def prepare(self, grad_enabled):
        if grad_enabled and self.require_backward_grad_sync:
            for p in self.params:
                p.register_hook(functools.partial(_delayed_all_reduce_hook, self))
