# adapted from pytorch/torchtitan torchtitan/distributed/__init__.py
from .expert_parallel import ExpertParallel, Float8ExpertParallel
from .moe import MoE, TokenChoiceTopKRouter

__all__ = ["ExpertParallel", "Float8ExpertParallel", "MoE", "TokenChoiceTopKRouter"]
