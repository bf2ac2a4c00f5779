# adapted from facebookresearch/xformers xformers/ops/swiglu_op.py
from .dispatch import SwiGLUOpDispatch, swiglu
from .ops import SwiGLUEagerOp, SwiGLUPackedFusedOp

__all__ = ["SwiGLUOpDispatch", "swiglu", "SwiGLUEagerOp", "SwiGLUPackedFusedOp"]
