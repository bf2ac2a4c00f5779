# adapted from databricks/megablocks megablocks/layers/moe.py
from .moe import MoE, get_load_balancing_loss
from .router import RoutingPolicy, policy_for_step
