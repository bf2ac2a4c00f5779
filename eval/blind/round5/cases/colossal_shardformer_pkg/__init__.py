"""Modelled on ColossalAI colossalai/shardformer/layer/linear.py (Linear1D_Col) and
_operation.py (linear_with_async_comm, linear_gather_forward_reducescatter_backward,
matmul_gather_forward_reducescatter_backward)."""
from .linear import Linear1D_Col

__all__ = ["Linear1D_Col"]
