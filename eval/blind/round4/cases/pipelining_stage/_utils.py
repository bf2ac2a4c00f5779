import functools

import torch


def with_grad_mode(fn):
    """Pass the caller's autograd mode down to schedule internals."""

    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        kwargs.setdefault("grad_mode", torch.is_grad_enabled())
        return fn(self, *args, **kwargs)

    return wrapper
