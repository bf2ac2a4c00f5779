# adapted from facebookresearch/fairscale fairscale/nn/data_parallel/fully_sharded_data_parallel.py
from .fsdp import FullyShardedDataParallel

__all__ = ["FullyShardedDataParallel"]
