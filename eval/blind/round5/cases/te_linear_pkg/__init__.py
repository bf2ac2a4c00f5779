"""Modelled on TransformerEngine transformer_engine/pytorch/module/linear.py (Linear / _Linear)."""
from .module import Linear

__all__ = ["Linear"]
