# Adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe (router.py, token_dispatcher.py, moe_utils.py).
from .dispatcher import MoEAlltoAllTokenDispatcher
from .plan import DispatchPlan, plan_for_forward
from .router import TopKRouter

__all__ = ["DispatchPlan", "plan_for_forward", "TopKRouter", "MoEAlltoAllTokenDispatcher"]
