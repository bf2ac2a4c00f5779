# Modelled on megatron/core/transformer/moe/ (Megatron-LM core_r0.11-0.13).
from .router import RoutingResult, TopKRouter
from .token_dispatcher import MoEAlltoAllTokenDispatcher

__all__ = ["RoutingResult", "TopKRouter", "MoEAlltoAllTokenDispatcher"]
