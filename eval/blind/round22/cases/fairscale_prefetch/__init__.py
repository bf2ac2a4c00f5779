# adapted from facebookresearch/fairscale fairscale/nn/data_parallel/fully_sharded_data_parallel.py
from .fully_sharded_data_parallel import FullyShardedDataParallel
from .policy import ExecOrderTracer, PrefetchPolicy, get_prefetch_policy

__all__ = ["FullyShardedDataParallel", "ExecOrderTracer", "PrefetchPolicy", "get_prefetch_policy"]
