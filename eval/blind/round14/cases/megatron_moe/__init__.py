# adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/moe_layer.py
from .moe_layer import MoELayer
from .router import TopKRouter
from .token_dispatcher import MoEAlltoAllTokenDispatcher

__all__ = ["MoELayer", "TopKRouter", "MoEAlltoAllTokenDispatcher"]
