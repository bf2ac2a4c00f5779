# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
import contextlib

import torch

_TP_GRAD_ENABLED = None


@contextlib.contextmanager
def tp_forward_scope():
    """Snapshot the autograd mode once for all TP collectives issued inside the scope."""
    global _TP_GRAD_ENABLED
    prev = _TP_GRAD_ENABLED
    _TP_GRAD_ENABLED = torch.is_grad_enabled()
    try:
        yield
    finally:
        _TP_GRAD_ENABLED = prev


def tp_grad_enabled():
    return _TP_GRAD_ENABLED
