# Adapted from pytorch/pytorch torch/distributed/fsdp/_runtime_utils.py (root pre-forward state handling).
import contextlib

import torch


class _ForwardState:
    def __init__(self) -> None:
        self.grad_enabled = True
        self.depth = 0


_FWD_STATE = _ForwardState()


@contextlib.contextmanager
def root_forward_context():
    prev = _FWD_STATE.grad_enabled
    _FWD_STATE.grad_enabled = torch.is_grad_enabled()
    _FWD_STATE.depth += 1
    try:
        yield _FWD_STATE
    finally:
        _FWD_STATE.depth -= 1
        _FWD_STATE.grad_enabled = prev
