# adapted from NVIDIA/apex apex/transformer/tensor_parallel/layers.py
from .layers import RowParallelLinear
from ._kwargs import comm_kwargs
