# Modelled on xformers/ops/fmha/__init__.py (xformers 0.0.23-0.0.28).
from typing import Optional, Tuple, Type, Union

import torch

from xformers.ops.fmha import attn_bias as _attn_bias
from xformers.ops.fmha.common import AttentionBwOpBase, AttentionFwOpBase, Inputs
from xformers.ops.fmha.dispatch import _dispatch_bw, _dispatch_fw

AttentionOp = Tuple[Optional[Type[AttentionFwOpBase]], Optional[Type[AttentionBwOpBase]]]


class _fMHA(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op_fw, op_bw, *args):
        inp = Inputs(*args[:6])
        op_fw = op_fw if op_fw is not None else _dispatch_fw(inp, True)
        out, op_ctx = op_fw.apply(inp, needs_gradient=True)
        ctx.save_for_backward(inp.query, inp.key, inp.value, op_ctx.out, op_ctx.lse)
        ctx.op_fw = op_fw
        ctx.op_bw = op_bw
        ctx.p = inp.p
        ctx.scale = inp.scale
        ctx.attn_bias = inp.attn_bias
        return out

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError


def _memory_efficient_attention_forward(inp: Inputs, op: Optional[Type[AttentionFwOpBase]]) -> torch.Tensor:
    inp.validate_inputs()
    output_shape = inp.normalize_bmhk()
    if op is None:
        op = _dispatch_fw(inp, False)
    else:
        assert op.supports(inp)
    out, *_ = op.apply(inp, needs_gradient=False)
    return out.reshape(output_shape)


def _memory_efficient_attention(inp: Inputs, op: Optional[AttentionOp] = None) -> torch.Tensor:
    if not torch.is_grad_enabled() or all(x.requires_grad is False for x in [inp.query, inp.key, inp.value]):
        return _memory_efficient_attention_forward(inp, op=op[0] if op is not None else None)
    output_shape = inp.normalize_bmhk()
    return _fMHA.apply(
        op[0] if op is not None else None, op[1] if op is not None else None,
        inp.query, inp.key, inp.value, inp.attn_bias, inp.p, inp.scale,
    ).reshape(output_shape)


def memory_efficient_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_bias: Optional[Union[torch.Tensor, _attn_bias.AttentionBias]] = None,
    p: float = 0.0,
    scale: Optional[float] = None,
    *,
    op: Optional[AttentionOp] = None,
    output_dtype: Optional[torch.dtype] = None,
) -> torch.Tensor:
    effective_p = p if torch.is_grad_enabled() else 0.0
    return _memory_efficient_attention(
        Inputs(query=query, key=key, value=value, p=effective_p, attn_bias=attn_bias, scale=scale,
               output_dtype=output_dtype),
        op=op,
    )
