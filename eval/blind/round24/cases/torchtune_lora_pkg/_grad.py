# adapted from pytorch/torchtune torchtune/modules/peft/lora.py
import functools

import torch


def grad_aware(fn):
    """Passes the caller's autograd mode to the wrapped forward as a keyword."""

    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        extra = {"grad_enabled": torch.is_grad_enabled()}
        extra.update(kwargs)
        return fn(self, *args, **extra)

    return wrapper
