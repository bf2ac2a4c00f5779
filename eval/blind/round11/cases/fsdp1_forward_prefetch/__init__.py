# Adapted from pytorch/pytorch torch/distributed/fsdp (fully_sharded_data_parallel.py + _runtime_utils.py).
from .fsdp import FullyShardedDataParallel

__all__ = ["FullyShardedDataParallel"]
