# adapted from pytorch/pytorch torch/distributed/tensor/parallel/style.py
# Per-step record of whether the current forward will be followed by a backward.
import torch
import torch.nn as nn

_REDISTRIBUTE_ASYNC: bool = True


def _record_grad_mode(module: nn.Module, inputs):
    """Root forward pre-hook: snapshot grad mode once per step so every
    parallelized submodule sees the same value."""
    global _REDISTRIBUTE_ASYNC
    _REDISTRIBUTE_ASYNC = torch.is_grad_enabled()
    return None


def redistribute_async() -> bool:
    return _REDISTRIBUTE_ASYNC
