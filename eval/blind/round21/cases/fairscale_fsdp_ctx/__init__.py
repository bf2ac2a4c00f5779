# adapted from facebookresearch/fairscale fairscale/nn/data_parallel/fully_sharded_data_parallel.py
from .fully_sharded import FullyShardedDataParallel
from ._forward_state import forward_context, forward_grad_enabled

__all__ = ["FullyShardedDataParallel", "forward_context", "forward_grad_enabled"]
