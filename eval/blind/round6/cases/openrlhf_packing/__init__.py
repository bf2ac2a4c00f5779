from .actor import Actor
from .state import PACKING_STATE

__all__ = ["Actor", "PACKING_STATE"]
