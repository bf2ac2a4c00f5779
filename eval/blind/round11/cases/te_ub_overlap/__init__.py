# Adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/linear.py (_Linear / Linear).
from .module import Linear

__all__ = ["Linear"]
