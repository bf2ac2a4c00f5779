from .config import SequenceParallelConfig
from .layer import DistributedAttention

__all__ = ["DistributedAttention", "SequenceParallelConfig"]
