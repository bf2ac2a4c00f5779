import functools

import torch


def grad_mode_aware(fn):
    """Pass the caller's autograd mode to a ParallelStyle input/output hook as ``grad_enabled``."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        kwargs.setdefault("grad_enabled", torch.is_grad_enabled())
        return fn(*args, **kwargs)

    return wrapper
