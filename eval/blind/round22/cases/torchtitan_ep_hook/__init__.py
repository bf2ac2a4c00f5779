# adapted from pytorch/torchtitan torchtitan/models/moe.py
from .expert_parallel import ExpertParallel
from .moe import MoE

__all__ = ["ExpertParallel", "MoE"]
