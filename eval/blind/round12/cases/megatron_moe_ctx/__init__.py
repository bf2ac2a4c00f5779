# adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/moe_utils.py
from .state import MoEForwardState, moe_forward_scope
from .routing import topk_routing
from .dispatcher import AlltoAllDispatcher
from .layer import MoELayer
