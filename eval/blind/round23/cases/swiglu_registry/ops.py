# adapted from facebookresearch/xformers xformers/ops/swiglu_op.py
import torch
import torch.nn.functional as F

from xformers.ops.common import get_xformers_operator
from xformers.ops.unbind import stack_or_none

_REGISTRY = []


def register_swiglu_op(op):
    _REGISTRY.append(op)
    return op


def get_registered_ops():
    return list(_REGISTRY)


class SwiGLUOp:
    NEEDS_AUTOGRAD_FREE = False

    def __init__(self, op, packed_weights: bool, name: str, constraints):
        self.NAME = name
        self.PACKED_WEIGHTS = packed_weights
        self.op = op
        self.constraints = constraints

    def supports(self, op) -> bool:
        if self.PACKED_WEIGHTS and not op.packed_weights:
            return False
        return all(c(op) for c in self.constraints)

    def __call__(self, *args, **kwargs):
        return self.op(*args, **kwargs)


class _TrainingOnlyFusedOp(SwiGLUOp):
    """The bf16 dual-gemm kernel accumulates in half precision; used for training steps."""

    def supports(self, op) -> bool:
        if not op.needs_autograd:
            return False
        return super().supports(op)


def _only_sm80(op) -> bool:
    device_type = op.device if isinstance(op.device, str) else op.device.type
    return device_type == "cuda" and torch.cuda.get_device_capability(op.device)[0] >= 8


def _eager_functional_swiglu(x, w1, b1, w2, b2, w3, b3):
    x1 = F.linear(x, w1, b1)
    x2 = F.linear(x, w2, b2)
    return F.linear(F.silu(x1) * x2, w3, b3)


SwiGLUPackedFusedOp = register_swiglu_op(
    _TrainingOnlyFusedOp(get_xformers_operator("swiglu_packedw"), True, "fused.p.cpp", constraints=[_only_sm80])
)
SwiGLUEagerOp = SwiGLUOp(_eager_functional_swiglu, False, "eager", constraints=[])
