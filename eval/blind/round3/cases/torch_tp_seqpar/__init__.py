# Modelled on torch/distributed/tensor/parallel/style.py (PyTorch 2.5) with a grad-mode-injecting decorator.
from .style import ColwiseParallel, SequenceParallel

__all__ = ["ColwiseParallel", "SequenceParallel"]
