# adapted from hpcaitech/ColossalAI colossalai/shardformer/layer/__init__.py
from .dropout import Dropout1D
from .linear import Linear1D_Col, Linear1D_Row

__all__ = ["Dropout1D", "Linear1D_Col", "Linear1D_Row"]
