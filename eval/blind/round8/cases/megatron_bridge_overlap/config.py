from dataclasses import dataclass, field
from typing import Optional


@dataclass
class CommOverlapConfig:
    tp_comm_overlap: bool = False
    tp_comm_overlap_cfg: Optional[dict] = field(default=None)
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = True
    defer_embedding_wgrad_compute: bool = False
    bucket_size: Optional[int] = None
