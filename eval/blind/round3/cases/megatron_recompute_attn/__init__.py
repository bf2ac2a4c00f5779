# Modelled on megatron/core/transformer/{transformer_block.py,transformer_layer.py,dot_product_attention.py} (core_r0.9).
from .transformer_block import TransformerBlock

__all__ = ["TransformerBlock"]
