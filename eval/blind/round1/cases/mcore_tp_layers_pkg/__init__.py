"""Megatron-style tensor-parallel layers split into utils / mappings / layers."""
from .layers import ColumnParallelLinear, RowParallelLinear

__all__ = ["ColumnParallelLinear", "RowParallelLinear"]
