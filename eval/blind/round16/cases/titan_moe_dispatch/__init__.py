# adapted from pytorch/torchtitan torchtitan/models/common/moe/__init__.py
from .moe import MoE
from .router import TokenChoiceTopKRouter
from .token_dispatcher import AllToAllTokenDispatcher

__all__ = ["MoE", "TokenChoiceTopKRouter", "AllToAllTokenDispatcher"]
