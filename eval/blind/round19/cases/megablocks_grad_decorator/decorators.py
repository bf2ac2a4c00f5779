# adapted from databricks/megablocks megablocks/layers/moe.py
import functools

import torch


def grad_aware(fn):
    """Resolve autograd state once at the top of the layer's forward."""

    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        kwargs.setdefault("_grad", torch.is_grad_enabled())
        return fn(self, *args, **kwargs)

    return wrapper
