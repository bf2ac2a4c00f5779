# adapted from databricks/megablocks megablocks/layers/moe.py
from .losses import save_load_balancing_loss, get_load_balancing_loss, clear_load_balancing_loss
from .decorators import grad_aware
from .moe import MoE

__all__ = ["save_load_balancing_loss", "get_load_balancing_loss", "clear_load_balancing_loss", "grad_aware", "MoE"]
