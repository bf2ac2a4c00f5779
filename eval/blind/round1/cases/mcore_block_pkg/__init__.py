"""Transformer block / layer split (cf. megatron/core/transformer/transformer_block.py, transformer_layer.py)."""
from .transformer_block import TransformerBlock
from .transformer_layer import LayerForwardState, TransformerLayer

__all__ = ["TransformerBlock", "TransformerLayer", "LayerForwardState"]
