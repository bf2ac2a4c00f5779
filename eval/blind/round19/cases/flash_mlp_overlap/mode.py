# adapted from Dao-AILab/flash-attention flash_attn/ops/fused_dense.py
from contextlib import contextmanager

import torch

_STATE = {"grad": True}


@contextmanager
def capture_grad_mode():
    prev = _STATE["grad"]
    _STATE["grad"] = torch.is_grad_enabled()
    try:
        yield
    finally:
        _STATE["grad"] = prev


def overlap_enabled() -> bool:
    return _STATE["grad"]
