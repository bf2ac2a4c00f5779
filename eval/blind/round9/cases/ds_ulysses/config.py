from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class SequenceParallelConfig:
    scatter_idx: int = 2
    gather_idx: int = 0
    batch_dim_idx: int = 0
    sp_overlap_comm: bool = False
    sp_stream: Optional[torch.cuda.Stream] = None

    def __post_init__(self):
        if self.sp_overlap_comm and self.sp_stream is None:
            self.sp_stream = torch.cuda.Stream()
