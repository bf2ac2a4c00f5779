# adapted from pytorch/torchtitan torchtitan/models/moe/moe.py
from .moe import MoE
from .load_balance import update_expert_bias
