# adapted from pytorch/torchtitan torchtitan/models/moe/moe.py
from .moe import MoE, TokenReorderer
from .routing_state import routing_scope
