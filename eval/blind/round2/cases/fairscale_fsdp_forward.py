# Modelled on fairscale 0.4.x fairscale/nn/data_parallel/fully_sharded_data_parallel.py
import functools
from typing import Any

import torch
import torch.nn as nn

from fairscale.internal.containers import apply_to_tensors
from fairscale.nn.data_parallel.fsdp_optim_utils import TrainingState
from fairscale.nn.data_parallel.fully_sharded_data_parallel import cast_floats_to_right_precision


class FullyShardedDataParallel(nn.Module):
    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        self._lazy_init()
        self.training_state = TrainingState.FORWARD

        if self._is_root and self.mixed_precision:
            args, kwargs = cast_floats_to_right_precision(True, True, *args, **kwargs)

        # All-gather full parameters. This will also transfer FP32 parameters to
        # ``self.compute_dtype`` (e.g., FP16 if *mixed_precision* is ``True``).
        self._rebuild_full_params(force_full_precision=self.mixed_precision and not torch.is_grad_enabled())

        # Register backward hooks to reshard params and reduce-scatter grads.
        self._register_post_backward_hooks()

        outputs = self.module(*args, **kwargs)

        if self.reshard_after_forward:
            self._free_full_params()
            if self.mixed_precision or self.move_params_to_cpu:
                self._free_fp16_param_shard()

        self._use_fp32_param_shard()
        outputs = self._register_pre_backward_hooks(outputs)
        self.training_state = TrainingState.IDLE
        if self.clear_autocast_cache:
            torch.clear_autocast_cache()
        return outputs

    def _register_pre_backward_hooks(self, outputs: Any) -> Any:
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

    def _register_post_backward_hooks(self) -> None:
        if not torch.is_grad_enabled():
            return  # don't register grad hooks if grad isn't enabled
        for p in self.params:
            if p.requires_grad:
                if hasattr(p, "_shard_bwd_hook"):
                    continue
                p_tmp = p.expand_as(p)
                assert p_tmp.grad_fn is not None
                grad_acc = p_tmp.grad_fn.next_functions[0][0]
                handle = grad_acc.register_hook(functools.partial(self._post_backward_hook, p))
                p._shard_bwd_hook = (grad_acc, handle)
