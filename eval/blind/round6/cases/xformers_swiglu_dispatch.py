"""SwiGLU feed-forward with operator dispatch between packed fused kernels and eager math."""
from typing import Callable, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from xformers.ops.swiglu_op import SwiGLUPackedFusedOp, _SwiGLUDecomposedOp


def _eager_swiglu(x, w1, b1, w2, b2, w3, b3):
    x1 = F.linear(x, w1, b1)
    x2 = F.linear(x, w2, b2)
    hidden = F.silu(x1) * x2
    return F.linear(hidden, w3, b3)


def _fused_swiglu(x, w1, b1, w2, b2, w3, b3):
    w1w2 = torch.stack([w1, w2], dim=0)
    b1b2 = torch.stack([b1, b2], dim=0) if b1 is not None else None
    return SwiGLUPackedFusedOp.FORWARD_OPERATOR(x, w1w2, b1b2, w3, b3)


def select_swiglu_impl(x: torch.Tensor, packed: bool) -> Callable:
    if not packed or x.device.type != "cuda":
        return _eager_swiglu
    return _fused_swiglu if torch.is_grad_enabled() else _eager_swiglu


class SwiGLU(nn.Module):
    def __init__(self, in_features: int, hidden_features: int, out_features: Optional[int] = None,
                 bias: bool = True, _pack_weights: bool = True) -> None:
        super().__init__()
        out_features = out_features or in_features
        self._pack_weights = _pack_weights
        self.w1 = nn.Linear(in_features, hidden_features, bias=bias)
        self.w2 = nn.Linear(in_features, hidden_features, bias=bias)
        self.w3 = nn.Linear(hidden_features, out_features, bias=bias)
        self.op: Optional[Callable] = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        impl = self.op or select_swiglu_impl(x, self._pack_weights)
        return impl(
            x,
            self.w1.weight, self.w1.bias,
            self.w2.weight, self.w2.bias,
            self.w3.weight, self.w3.bias,
        )
