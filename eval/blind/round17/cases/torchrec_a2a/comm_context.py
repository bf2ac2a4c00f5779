# adapted from pytorch/torchrec torchrec/distributed/embedding_sharding.py
from dataclasses import dataclass, field
from typing import List

import torch


@dataclass
class EmbeddingCommContext:
    batch_size_per_rank: List[int] = field(default_factory=list)
    grad_enabled: bool = True


def make_comm_context(batch_size_per_rank: List[int]) -> EmbeddingCommContext:
    return EmbeddingCommContext(
        batch_size_per_rank=batch_size_per_rank,
        grad_enabled=torch.is_grad_enabled(),
    )
