# adapted from pytorch/pytorch torch/distributed/algorithms/_checkpoint/checkpoint_wrapper.py
import contextlib
from enum import auto, Enum
from functools import partial
from typing import Any

import torch
import torch.nn as nn
from torch.autograd.graph import save_on_cpu
from torch.distributed.utils import _pack_kwargs, _unpack_kwargs
from torch.utils.checkpoint import checkpoint as torch_utils_checkpoint


class CheckpointImpl(Enum):
    REENTRANT = auto()
    NO_REENTRANT = auto()


class ActivationWrapper(torch.nn.Module):
    def __init__(self, mod):
        super().__init__()
        self._checkpoint_wrapped_module = mod

    def forward(self, *args, **kwargs):
        raise ValueError("Subclasses should implement forward().")

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._checkpoint_wrapped_module, name)


class OffloadWrapper(ActivationWrapper):
    def __init__(self, mod):
        super().__init__(mod)

    def forward(self, *args, **kwargs):
        offload_ctx = save_on_cpu(pin_memory=True) if torch.is_grad_enabled() else contextlib.nullcontext()
        with offload_ctx:
            return self._checkpoint_wrapped_module(*args, **kwargs)


class CheckpointWrapper(ActivationWrapper):
    def __init__(self, mod: torch.nn.Module, checkpoint_impl: CheckpointImpl = CheckpointImpl.NO_REENTRANT,
                 checkpoint_fn=None, **checkpoint_fn_kwargs):
        super().__init__(mod)
        self.checkpoint_impl = checkpoint_impl
        if checkpoint_fn is None:
            self.checkpoint_fn = partial(
                torch_utils_checkpoint,
                use_reentrant=(self.checkpoint_impl == CheckpointImpl.REENTRANT),
                **checkpoint_fn_kwargs,
            )
        else:
            self.checkpoint_fn = partial(checkpoint_fn, **checkpoint_fn_kwargs)

    def forward(self, *args, **kwargs):
        if not torch.is_grad_enabled():
            # no graph to rebuild; skip the checkpoint machinery entirely
            return self._checkpoint_wrapped_module(*args, **kwargs)
        if self.checkpoint_impl == CheckpointImpl.REENTRANT and kwargs != {}:
            flat_args, kwarg_keys = _pack_kwargs(*args, **kwargs)

            def my_function(*inputs):
                unpacked_args, unpacked_kwargs = _unpack_kwargs(inputs, kwarg_keys)
                return self._checkpoint_wrapped_module(*unpacked_args, **unpacked_kwargs)

            return self.checkpoint_fn(my_function, *flat_args)
        else:
            return self.checkpoint_fn(self._checkpoint_wrapped_module, *args, **kwargs)
