# Modeled on OpenRLHF openrlhf/models/ring_attn_utils.py (convert_ring_attn_params,
# update_ring_attn_params) and openrlhf/models/model.py (reward/critic forward with ring_attn_group).
from .model import CriticModel
from .ring_attn_utils import convert_ring_attn_params
