"""Modelled on Megatron-LM megatron/core/transformer/moe/router.py (TopKRouter),
moe_utils.py (topk_softmax_with_capacity) and the MoE token dispatcher."""
from .router import TopKRouter

__all__ = ["TopKRouter"]
