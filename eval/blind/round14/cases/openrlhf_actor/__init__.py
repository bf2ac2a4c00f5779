# adapted from OpenRLHF/OpenRLHF openrlhf/models/__init__.py
from .actor import Actor
from .ring_attn_utils import get_ring_attn_group, set_ring_attn_group
from .utils import log_probs_from_logits

__all__ = ["Actor", "get_ring_attn_group", "log_probs_from_logits", "set_ring_attn_group"]
