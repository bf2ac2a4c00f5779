# adapted from vllm-project/vllm vllm/forward_context.py
from .forward_context import ForwardContext, get_forward_context, set_forward_context
from .layer import FusedMoE

__all__ = ["ForwardContext", "get_forward_context", "set_forward_context", "FusedMoE"]
