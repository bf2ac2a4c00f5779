from typing import Any, Optional, Tuple, Type, Union

import torch
import torch.nn as nn

from xformers.ops.fmha import attn_bias as _attn_bias
from xformers.ops.fmha.common import AttentionFwOpBase, AttentionOp, Inputs
from xformers.ops.fmha.dispatch import _dispatch_bw, _dispatch_fw

_grad_mode = torch.is_grad_enabled


class _fMHA(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op: AttentionOp, *args: Any) -> Any:
        inp = Inputs(*args)
        op_fw = op[0] if op is not None else None
        out, op_ctx = _memory_efficient_attention_forward_requires_grad(inp=inp, op=op_fw)
        ctx.save_for_backward(inp.query, inp.key, inp.value, op_ctx.out, op_ctx.lse)
        ctx.op_fw = op_fw
        ctx.p = inp.p
        ctx.scale = inp.scale
        ctx.attn_bias = inp.attn_bias
        return out, op_ctx.lse


def _memory_efficient_attention_forward(inp: Inputs, op: Optional[Type[AttentionFwOpBase]]):
    inp.validate_inputs()
    output_shape = inp.normalize_bmhk()
    if op is None:
        op = _dispatch_fw(inp, False)
    out, *_ = op.apply(inp, needs_gradient=False)
    return out.reshape(output_shape)


def _memory_efficient_attention_forward_requires_grad(inp: Inputs, op):
    inp.validate_inputs()
    output_shape = inp.normalize_bmhk()
    if op is None:
        op = _dispatch_fw(inp, True)
    out = op.apply(inp, needs_gradient=True)
    return out[0].reshape(output_shape), out[1]


def _memory_efficient_attention(inp: Inputs, op: Optional[AttentionOp] = None) -> torch.Tensor:
    _fw_only = not _grad_mode()
    if _fw_only or all(x.requires_grad is False for x in [inp.query, inp.key, inp.value]):
        return _memory_efficient_attention_forward(inp, op=op[0] if op is not None else None)
    output_shape = inp.normalize_bmhk()
    out, _ = _fMHA.apply(op, inp.query, inp.key, inp.value, inp.attn_bias, inp.p, inp.scale)
    return out.reshape(output_shape)


def memory_efficient_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_bias: Optional[Union[torch.Tensor, _attn_bias.AttentionBias]] = None,
    p: float = 0.0,
    scale: Optional[float] = None,
    *,
    op: Optional[AttentionOp] = None,
) -> torch.Tensor:
    return _memory_efficient_attention(
        Inputs(query=query, key=key, value=value, p=p, attn_bias=attn_bias, scale=scale),
        op=op,
    )


class MemoryEfficientSelfAttention(nn.Module):
    def __init__(self, dim: int, num_heads: int, attn_drop: float = 0.0, causal: bool = True):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.attn_drop = attn_drop
        self.causal = causal
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, M, C = x.shape
        qkv = self.qkv(x).reshape(B, M, 3, self.num_heads, self.head_dim)
        q, k, v = qkv.unbind(2)
        bias = _attn_bias.LowerTriangularMask() if self.causal else None
        out = memory_efficient_attention(
            q, k, v,
            attn_bias=bias,
            p=self.attn_drop if _grad_mode() else 0.0,
        )
        return self.proj(out.reshape(B, M, C))
