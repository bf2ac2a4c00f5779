# adapted from pytorch/pytorch torch/distributed/tensor/_api.py
from ._api import DTensor, distribute_module, distribute_tensor
from .style import ColwiseParallel, RowwiseParallel, SequenceParallel
