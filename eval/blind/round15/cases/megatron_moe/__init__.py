# adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/router.py
from .router import TopKRouter
from .token_dispatcher import MoEAlltoAllTokenDispatcher
