# Modelled on ColossalAI colossalai/nn/layer/moe/{routers.py,layers.py} (legacy MoE)
from .layers import MoeLayer
from .routers import Top1Router

__all__ = ["MoeLayer", "Top1Router"]
