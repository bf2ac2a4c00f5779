from .router import TopKRouter, RoutingResult
from .dispatcher import MoEAlltoAllTokenDispatcher
