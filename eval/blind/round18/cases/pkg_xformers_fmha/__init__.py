# adapted from facebookresearch/xformers xformers/ops/fmha/__init__.py
from .attention import memory_efficient_attention, memory_efficient_attention_forward
from .common import Inputs

__all__ = ["Inputs", "memory_efficient_attention", "memory_efficient_attention_forward"]
