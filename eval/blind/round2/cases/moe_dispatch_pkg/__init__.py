# Modelled on Megatron-LM megatron/core/transformer/moe/{moe_layer.py,router.py,token_dispatcher.py,fused_a2a.py}
from .moe_layer import MoELayer

__all__ = ["MoELayer"]
