# adapted from pytorch/pytorch torch/distributed/tensor/parallel/style.py
import functools
from contextlib import contextmanager

import torch

_GRAD_MODE_AT_ENTRY: bool = True


def grad_mode_at_entry() -> bool:
    return _GRAD_MODE_AT_ENTRY


@contextmanager
def capture_grad_mode():
    global _GRAD_MODE_AT_ENTRY
    prev = _GRAD_MODE_AT_ENTRY
    _GRAD_MODE_AT_ENTRY = torch.is_grad_enabled()
    try:
        yield
    finally:
        _GRAD_MODE_AT_ENTRY = prev


def with_grad_mode_capture(forward_fn):
    @functools.wraps(forward_fn)
    def wrapper(*args, **kwargs):
        with capture_grad_mode():
            return forward_fn(*args, **kwargs)
    return wrapper
