from .base import TransformerEngineBaseModule, get_ub, initialize_ub
from .linear import Linear

__all__ = ["Linear", "TransformerEngineBaseModule", "get_ub", "initialize_ub"]
