# adapted from pytorch/torchtitan torchtitan/models/moe.py
from .decision import RoutingDecision, decide_routing
from .router import TokenChoiceTopKRouter
from .moe import MoE

__all__ = ["RoutingDecision", "decide_routing", "TokenChoiceTopKRouter", "MoE"]
