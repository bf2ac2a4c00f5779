# adapted from hpcaitech/ColossalAI colossalai/shardformer/layer/_operation.py
from .comm import gather_forward_split_backward
from .ops import LinearWithAsyncCommunication
from .linear import Linear1D_Col
