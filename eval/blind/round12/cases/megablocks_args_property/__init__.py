# adapted from databricks/megablocks megablocks/layers/moe.py
from .arguments import Arguments
from .moe import MoE, get_load_balancing_loss
