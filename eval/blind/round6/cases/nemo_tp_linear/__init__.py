from .layers import ColumnParallelLinear
from .logits import vocab_parallel_logits
from .mode import current_mode

__all__ = ["ColumnParallelLinear", "vocab_parallel_logits", "current_mode"]
