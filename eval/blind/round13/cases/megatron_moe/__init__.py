# adapted from NVIDIA/Megatron-LM megatron/core/transformer/__init__.py
from .router import TopKRouter
from .token_dispatcher import MoEAlltoAllTokenDispatcher

__all__ = ["TopKRouter", "MoEAlltoAllTokenDispatcher"]
