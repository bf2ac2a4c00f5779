# adapted from facebookresearch/xformers xformers/ops/swiglu_op.py
from dataclasses import dataclass
from typing import Optional, Union

import torch

from .ops import get_registered_ops, SwiGLUEagerOp, stack_or_none


@dataclass
class SwiGLUOpDispatch:
    device: Union[torch.device, str]
    dtype: torch.dtype
    dtype_autocast_gpu: Optional[torch.dtype]
    packed_weights: bool
    bias_enabled: bool
    needs_autograd: bool

    @property
    def op(self):
        for op in get_registered_ops():
            if op.supports(self):
                return op
        return SwiGLUEagerOp


def make_dispatch(x, w1, b1, w2, b2, w3, b3) -> SwiGLUOpDispatch:
    return SwiGLUOpDispatch(
        device=x.device,
        dtype=x.dtype,
        packed_weights=stack_or_none((w1, w2), dim=0) is not None,
        dtype_autocast_gpu=torch.get_autocast_gpu_dtype()
        if torch.is_autocast_enabled()
        else w1.dtype,
        bias_enabled=b1 is not None and b2 is not None and b3 is not None,
        needs_autograd=torch.is_grad_enabled(),
    )


def swiglu(x, w1, b1, w2, b2, w3, b3, *, op=None):
    batch_shape = x.shape[:-1]
    x = x.reshape([-1, x.shape[-1]])
    if op is None:
        op = make_dispatch(x, w1, b1, w2, b2, w3, b3).op
    return op(x, w1, b1, w2, b2, w3, b3).reshape([*batch_shape, -1])
