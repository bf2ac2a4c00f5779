# Modelled on transformer_engine/pytorch/module/layernorm_linear.py (TransformerEngine 1.9-1.13).
from .module import LayerNormLinear

__all__ = ["LayerNormLinear"]
