# adapted from Dao-AILab/flash-attention flash_attn/ops/fused_dense.py
from .mode import capture_grad_mode, overlap_enabled
from .mlp import ParallelFusedMLP

__all__ = ["capture_grad_mode", "overlap_enabled", "ParallelFusedMLP"]
