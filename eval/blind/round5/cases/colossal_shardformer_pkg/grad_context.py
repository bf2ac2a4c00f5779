import functools

import torch


def with_autograd_state(fn):
    """Injects the caller's autograd state as a keyword so layers need not query it themselves."""

    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        kwargs.setdefault("grad_enabled", torch.is_grad_enabled())
        return fn(self, *args, **kwargs)

    return wrapper
