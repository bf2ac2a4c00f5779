# adapted from NVIDIA/apex apex/transformer/tensor_parallel/layers.py
from .factory import make_linear_impl
from .layers import ColumnParallelLinear

__all__ = ["make_linear_impl", "ColumnParallelLinear"]
