# adapted from pytorch/torchtitan torchtitan/models/moe.py
from ._registry import policy_for_step, register_policy, RoutingPolicy
from .router import TokenChoiceTopKRouter

__all__ = ["policy_for_step", "register_policy", "RoutingPolicy", "TokenChoiceTopKRouter"]
