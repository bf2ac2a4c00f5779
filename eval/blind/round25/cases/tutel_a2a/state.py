# adapted from microsoft/tutel tutel/impls/communicate.py
import contextlib

import torch

_GRAD_AT_DISPATCH = False


@contextlib.contextmanager
def grad_mode_scope():
    global _GRAD_AT_DISPATCH
    prev = _GRAD_AT_DISPATCH
    _GRAD_AT_DISPATCH = torch._C.is_grad_enabled()
    try:
        yield
    finally:
        _GRAD_AT_DISPATCH = prev


def current_grad_mode():
    return _GRAD_AT_DISPATCH
