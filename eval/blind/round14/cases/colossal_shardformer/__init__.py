# adapted from hpcaitech/ColossalAI colossalai/shardformer/layer/__init__.py
from ._operation import (
    gather_forward_split_backward,
    linear_gather_forward_reducescatter_backward,
    reduce_forward,
)
from .linear import Linear1D_Col, Linear1D_Row

__all__ = [
    "Linear1D_Col",
    "Linear1D_Row",
    "gather_forward_split_backward",
    "linear_gather_forward_reducescatter_backward",
    "reduce_forward",
]
