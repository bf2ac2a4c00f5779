# adapted from pytorch/pytorch torch/distributed/tensor/parallel/style.py
from ._grad_state import capture_grad_mode, grad_mode_at_entry
from .style import RowwiseParallel, SequenceParallel

__all__ = ["capture_grad_mode", "grad_mode_at_entry", "RowwiseParallel", "SequenceParallel"]
