"""Sequence-parallel linear layers split like colossalai/shardformer/layer (linear.py + _operation.py)."""
from .linear import Linear1D_Col, Linear1D_Row

__all__ = ["Linear1D_Col", "Linear1D_Row"]
