# Modeled on xformers xformers/ops/swiglu_op.py (SwiGLUOpDispatch.from_arguments / .op).
from dataclasses import dataclass
from typing import Optional, Sequence

import torch
import torch.nn.functional as F


class SwiGLUEagerOp:
    NAME = "eager"

    @staticmethod
    def supports(op) -> bool:
        return True

    @staticmethod
    def __call__(x, w1, b1, w2, b2, w3, b3):
        x1 = F.linear(x, w1, b1)
        x2 = F.linear(x, w2, b2)
        return F.linear(F.silu(x1) * x2, w3, b3)


class SwiGLUFusedOp(SwiGLUEagerOp):
    NAME = "fused.py"

    @staticmethod
    def supports(op) -> bool:
        return op.device.type == "cuda" and op.dtype in (torch.float16, torch.bfloat16)


class SwiGLUPackedFusedOp(SwiGLUFusedOp):
    NAME = "fused.py.packed"

    @staticmethod
    def supports(op) -> bool:
        return SwiGLUFusedOp.supports(op) and op.packed_weights


@dataclass
class SwiGLUOpDispatch:
    device: torch.device
    dtype: torch.dtype
    dtype_autocast_gpu: Optional[torch.dtype]
    packed_weights: bool
    bias_enabled: bool
    grad_mode: bool

    @property
    def op(self):
        priorities: Sequence = [SwiGLUPackedFusedOp, SwiGLUFusedOp]
        if self.grad_mode:
            for op in priorities:
                if op.supports(self):
                    return op
        return SwiGLUEagerOp

    @staticmethod
    def from_arguments(x, w1, b1, w2, b2, w3, b3) -> "SwiGLUOpDispatch":
        return SwiGLUOpDispatch(
            device=x.device,
            dtype=x.dtype,
            packed_weights=w1.ndim == 3,
            dtype_autocast_gpu=torch.get_autocast_gpu_dtype() if torch.is_autocast_enabled() else w1.dtype,
            bias_enabled=b1 is not None and b2 is not None and b3 is not None,
            grad_mode=torch.is_grad_enabled(),
        )


def swiglu(x, w1, b1, w2, b2, w3, b3, *, op=None):
    if op is None:
        op = SwiGLUOpDispatch.from_arguments(x, w1, b1, w2, b2, w3, b3).op
    return op()(x, w1, b1, w2, b2, w3, b3)
