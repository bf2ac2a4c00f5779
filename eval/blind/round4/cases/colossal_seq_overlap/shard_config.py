from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class ShardConfig:
    tensor_parallel_process_group: Optional[object] = None
    sequence_parallelism_mode: Optional[str] = None
    enable_sequence_parallelism: bool = False
    enable_sequence_overlap: bool = False
    fp8_communication: bool = False


def sequence_overlap_active(cfg: ShardConfig) -> bool:
    """Overlap the sequence all-gather with the matmul (chunked, on a side stream)."""
    return cfg.enable_sequence_parallelism and cfg.enable_sequence_overlap and torch.is_grad_enabled()
