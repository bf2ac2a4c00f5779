# adapted from pytorch/torchtitan torchtitan/models/moe.py
from .base import GradModeAwareModule
from .router import TokenChoiceTopKRouter
from .experts import GroupedExperts, MoE

__all__ = ["GradModeAwareModule", "TokenChoiceTopKRouter", "GroupedExperts", "MoE"]
