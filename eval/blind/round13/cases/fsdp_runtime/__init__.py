# adapted from pytorch/pytorch torch/distributed/fsdp/__init__.py
from .fully_sharded_data_parallel import FullyShardedDataParallel

__all__ = ["FullyShardedDataParallel"]
