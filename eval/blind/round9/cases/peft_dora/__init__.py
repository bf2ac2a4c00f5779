from .dora import DoraLinearLayer
from .layer import Linear, LoraLayer
from .tuners_utils import BaseTunerLayer

__all__ = ["BaseTunerLayer", "DoraLinearLayer", "Linear", "LoraLayer"]
