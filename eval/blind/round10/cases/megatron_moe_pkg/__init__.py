# Package adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/{router.py,token_dispatcher.py}
from .state import grad_mode_scope, grad_on
from .router import TopKRouter
from .dispatcher import dispatch_tokens
