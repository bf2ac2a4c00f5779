# adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/__init__.py
"""Module level PyTorch APIs"""
from .layernorm_linear import LayerNormLinear
from .layernorm_mlp import LayerNormMLP
from .base import initialize_ub, destroy_ub
