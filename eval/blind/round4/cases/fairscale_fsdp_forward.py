# Modeled on fairscale fairscale/nn/data_parallel/fully_sharded_data_parallel.py
# (FullyShardedDataParallel.forward, _register_pre_backward_hooks, _register_post_backward_hooks,
# _rebuild_full_params(force_full_precision=...)).
import functools
from enum import Enum, auto

import torch
import torch.nn as nn
from torch.autograd import Variable


class TrainingState(Enum):
    IDLE = auto()
    FORWARD = auto()
    BACKWARD_PRE = auto()


def apply_to_tensors(fn, container):
    if torch.is_tensor(container):
        return fn(container)
    if isinstance(container, (list, tuple)):
        return type(container)(apply_to_tensors(fn, x) for x in container)
    if isinstance(container, dict):
        return {k: apply_to_tensors(fn, v) for k, v in container.items()}
    return container


class FullyShardedDataParallel(nn.Module):
    def __init__(self, module, mixed_precision=False, reshard_after_forward=True,
                 compute_dtype=None, fp32_eval=False):
        super().__init__()
        self.module = module
        self.mixed_precision = mixed_precision
        self.reshard_after_forward = reshard_after_forward
        self.compute_dtype = compute_dtype or (torch.float16 if mixed_precision else torch.float32)
        self.fp32_eval = fp32_eval
        self.training_state = TrainingState.IDLE
        self.params = list(module.parameters())

    def forward(self, *args, **kwargs):
        self.training_state = TrainingState.FORWARD
        full_prec = self.fp32_eval and self.mixed_precision and not torch.is_grad_enabled()
        self._rebuild_full_params(force_full_precision=full_prec)
        self._register_post_backward_hooks()
        outputs = self.module(*args, **kwargs)
        if self.reshard_after_forward:
            self._free_full_params()
        outputs = self._register_pre_backward_hooks(outputs)
        self.training_state = TrainingState.IDLE
        return outputs

    def _rebuild_full_params(self, force_full_precision=False):
        for p in self.params:
            src = p._fp32_shard if force_full_precision else getattr(p, "_fp16_shard", p._fp32_shard)
            p.data = src

    def _free_full_params(self):
        for p in self.params:
            p.data = p._fp32_shard

    def _register_pre_backward_hooks(self, outputs):
        if not torch.is_grad_enabled():
            return outputs  # don't register hooks if grad isn't enabled

        def _pre_backward_hook(*unused):
            self._rebuild_full_params()
            self.training_state = TrainingState.BACKWARD_PRE

        def _register_hook(t):
            if t.requires_grad:
                t.register_hook(_pre_backward_hook)
            return t

        return apply_to_tensors(_register_hook, outputs)

    def _register_post_backward_hooks(self):
        if not torch.is_grad_enabled():
            return  # don't register grad hooks if grad isn't enabled
        for p in self.params:
            if p.requires_grad:
                if hasattr(p, "_shard_bwd_hook"):
                    continue
                p_tmp = p.expand_as(p)
                grad_acc = p_tmp.grad_fn.next_functions[0][0]
                handle = grad_acc.register_hook(functools.partial(self._post_backward_hook, p))
                p._shard_bwd_hook = (grad_acc, handle)

    def _post_backward_hook(self, param, *unused):
        Variable._execution_engine.queue_callback(lambda: None)
