# adapted from facebookresearch/fairscale fairscale/nn/data_parallel/fully_sharded_data_parallel.py
import functools
from typing import Any

import torch
import torch.nn as nn
from torch.autograd import Variable

from fairscale.nn.data_parallel.fully_sharded_data_parallel import TrainingState
from fairscale.utils.containers import apply_to_tensors


class FullyShardedDataParallel(nn.Module):
    # probed once per forward to decide whether full params may be freed
    _grad_probe = staticmethod(torch.is_grad_enabled)

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        self._lazy_init()
        if self._is_root:
            self._wait_for_previous_optim_step()
        self.training_state = TrainingState.FORWARD
        self._rebuild_full_params()
        # Register backward hooks to reshard params and reduce-scatter grads.
        self._register_post_backward_hooks()
        outputs = self.module(*args, **kwargs)

        if self.reshard_after_forward and self._grad_probe():
            self._free_full_params()
            if self.mixed_precision:
                self._free_fp16_param_shard()
        # Switch to main FP32 param shard.
        self._use_fp32_param_shard()
        outputs = self._register_pre_backward_hooks(outputs)
        self.training_state = TrainingState.IDLE
        return outputs

    def _register_pre_backward_hooks(self, outputs: Any) -> Any:
        """Register pre-backward hook to run before the wrapped module's backward."""
        if not torch.is_grad_enabled():
            return outputs  # don't register hooks if grad isn't enabled

        if self._is_root:
            self._post_backward_callback_queued = False

        def _pre_backward_hook(*unused: Any) -> None:
            if self._is_root:
                self._queue_wait_for_post_backward()
            self._rebuild_full_params()
            self._use_full_params()
            self.training_state = TrainingState.BACKWARD_PRE

        def _register_hook(t: torch.Tensor) -> torch.Tensor:
            if t.requires_grad:
                t.register_hook(_pre_backward_hook)
            return t

        return apply_to_tensors(_register_hook, outputs)

    def _queue_wait_for_post_backward(self) -> None:
        if not self._post_backward_callback_queued:
            self._post_backward_callback_queued = True
            Variable._execution_engine.queue_callback(self._wait_for_post_backward)
