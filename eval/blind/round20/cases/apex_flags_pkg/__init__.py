# adapted from NVIDIA/apex apex/transformer/tensor_parallel/layers.py
from .layers import ColumnParallelLinear

__all__ = ["ColumnParallelLinear"]
