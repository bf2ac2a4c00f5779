# adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/__init__.py
"""Module level PyTorch APIs"""
from .layernorm_mlp import LayerNormMLP

__all__ = ["LayerNormMLP"]
