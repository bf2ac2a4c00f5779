# Modelled on TransformerEngine 2.x transformer_engine/pytorch/module/linear.py, split across modules
from .module import Linear

__all__ = ["Linear"]
