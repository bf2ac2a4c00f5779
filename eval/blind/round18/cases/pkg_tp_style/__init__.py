# adapted from pytorch/pytorch torch/distributed/tensor/parallel/style.py
from .api import parallelize_module
from .style import ColwiseParallel, ParallelStyle, RowwiseParallel, SequenceParallel

__all__ = [
    "ColwiseParallel",
    "ParallelStyle",
    "RowwiseParallel",
    "SequenceParallel",
    "parallelize_module",
]
