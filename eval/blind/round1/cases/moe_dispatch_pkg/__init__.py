"""Expert-parallel MoE layer split into config / routing / dispatcher modules."""
from .config import MoEDispatcherConfig
from .dispatcher import AlltoAllTokenDispatcher
from .routing import RoutingResult, TopKRouter

__all__ = ["MoEDispatcherConfig", "AlltoAllTokenDispatcher", "RoutingResult", "TopKRouter"]
