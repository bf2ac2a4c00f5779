# adapted from facebookresearch/xformers xformers/ops/swiglu_op.py
from dataclasses import dataclass
from typing import Optional, Sequence, Union

import torch
import torch.nn.functional as F
from torch import nn

from .common import get_xformers_operator
from .unbind import stack_or_none, unbind


class SwiGLUOp:
    def __init__(self, op, packed_weights: bool, name: str, constraints):
        self.NAME = name
        self.PACKED_WEIGHTS = packed_weights
        self.op = op
        self.constraints = constraints

    def supports(self, op: "SwiGLUOpDispatch") -> bool:
        if self.PACKED_WEIGHTS and not op.packed_weights:
            return False
        return all(c(op) for c in self.constraints)


class _ForwardToFunc(SwiGLUOp):
    def __call__(self, *args, **kwargs):
        return self.op(*args, **kwargs)


def _eager_functional_swiglu(x, w1, b1, w2, b2, w3, b3, requires_grad):
    x1 = F.linear(x, w1, b1)
    x2 = F.linear(x, w2, b2)
    hidden = F.silu(x1) * x2
    return F.linear(hidden, w3, b3)


@dataclass
class SwiGLUOpDispatch:
    device: Union[torch.device, str]
    dtype: torch.dtype
    dtype_autocast_gpu: Optional[torch.dtype]
    packed_weights: bool
    bias_enabled: bool
    grad_enabled: bool

    @property
    def op(self) -> SwiGLUOp:
        priorities: Sequence[SwiGLUOp] = [
            SwiGLUPackedFusedOp,
        ]
        for op in priorities:
            if op.supports(self):
                return op
        return SwiGLUEagerOp

    @staticmethod
    def from_arguments(x, w1, b1, w2, b2, w3, b3) -> "SwiGLUOpDispatch":
        return SwiGLUOpDispatch(
            device=x.device,
            dtype=x.dtype,
            packed_weights=stack_or_none((w1, w2), dim=0) is not None,
            dtype_autocast_gpu=torch.get_autocast_gpu_dtype()
            if torch.is_autocast_enabled()
            else w1.dtype,
            bias_enabled=b1 is not None and b2 is not None and b3 is not None,
            grad_enabled=torch.is_grad_enabled(),
        )


def _only_sm80(op: SwiGLUOpDispatch) -> bool:
    device_type = op.device if isinstance(op.device, str) else op.device.type
    return device_type == "cuda" and torch.cuda.get_device_capability(op.device)[0] >= 8


def _only_half_when_training(op: SwiGLUOpDispatch) -> bool:
    HALF_DTYPES = [torch.half, torch.bfloat16]
    return op.grad_enabled and op.dtype in HALF_DTYPES


SwiGLUPackedFusedOp = _ForwardToFunc(
    get_xformers_operator("swiglu_packedw"),
    True,
    "fused.p.cpp",
    constraints=[_only_sm80, _only_half_when_training],
)
SwiGLUEagerOp = _ForwardToFunc(_eager_functional_swiglu, False, "eager", constraints=[])


def swiglu(x, w1, b1, w2, b2, w3, b3, *, op: SwiGLUOp = None, requires_grad: bool = True):
    batch_shape = x.shape[:-1]
    x = x.reshape([-1, x.shape[-1]])
    if op is None:
        op = SwiGLUOpDispatch.from_arguments(x, w1, b1, w2, b2, w3, b3).op
    if not op.PACKED_WEIGHTS:
        return op(x, w1, b1, w2, b2, w3, b3, requires_grad).reshape([*batch_shape, -1])
    w1w2 = stack_or_none((w1, w2), dim=0)
    b1b2 = stack_or_none((b1, b2), dim=0) if b1 is not None else None
    return op(x, w1w2, b1b2, w3, b3, requires_grad).reshape([*batch_shape, -1])
