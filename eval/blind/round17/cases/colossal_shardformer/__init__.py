# adapted from hpcaitech/ColossalAI colossalai/shardformer/layer/_operation.py
from ._operation import gather_forward_split_backward, linear_with_async_comm
from .linear import Linear1D_Col
