# adapted from pytorch/torchtitan torchtitan/models/moe.py
from .router import RoutingPlan, TokenChoiceTopKRouter
from .moe import MoE, TokenReorderer

__all__ = ["RoutingPlan", "TokenChoiceTopKRouter", "MoE", "TokenReorderer"]
