# Module-level grad state recorded by a context manager around the MoE layer forward.
import contextlib
import torch

_GRAD_STATE = {"on": True}


@contextlib.contextmanager
def grad_mode_scope():
    prev = _GRAD_STATE["on"]
    _GRAD_STATE["on"] = torch.is_grad_enabled()
    try:
        yield
    finally:
        _GRAD_STATE["on"] = prev


def grad_on() -> bool:
    return _GRAD_STATE["on"]
