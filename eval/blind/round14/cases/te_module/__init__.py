# adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/__init__.py
"""Module level PyTorch APIs"""
from .base import TransformerEngineBaseModule, get_workspace, get_ub
from .linear import Linear

__all__ = ["Linear", "TransformerEngineBaseModule", "get_workspace", "get_ub"]
