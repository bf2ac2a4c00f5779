# Modeled on xformers xformers/ops/fmha/__init__.py (_memory_efficient_attention,
# the forward-only fast path).
from typing import Optional, Tuple, Type

import torch


class Inputs:
    def __init__(self, query, key, value, attn_bias=None, p=0.0, scale=None):
        self.query, self.key, self.value = query, key, value
        self.attn_bias, self.p, self.scale = attn_bias, p, scale

    def normalize_bmhk(self) -> Tuple[int, ...]:
        return tuple(self.query.shape[:-1]) + (self.value.shape[-1],)


def _memory_efficient_attention_forward(inp: Inputs, op=None):
    from xformers.ops.fmha.dispatch import _dispatch_fw
    output_shape = inp.normalize_bmhk()
    if op is None:
        op = _dispatch_fw(inp, False)
    out, *_ = op.apply(inp, needs_gradient=False)
    return out.reshape(output_shape)


class _fMHA(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op_fw, op_bw, *args):
        from xformers.ops.fmha.dispatch import _dispatch_fw
        inp = Inputs(*args)
        op = op_fw if op_fw is not None else _dispatch_fw(inp, True)
        out, op_ctx = op.apply(inp, needs_gradient=True)
        ctx.save_for_backward(inp.query, inp.key, inp.value, op_ctx.out, op_ctx.lse)
        ctx.op_bw = op_bw
        return out, op_ctx.lse

    @staticmethod
    def backward(ctx, grad, grad_lse):
        raise NotImplementedError


def _memory_efficient_attention(inp: Inputs, op: Optional[Tuple[Type, Type]] = None):
    # fast-path that doesn't require computing the logsumexp for backward computation
    if not torch.is_grad_enabled() or all(x.requires_grad is False for x in [inp.query, inp.key, inp.value]):
        return _memory_efficient_attention_forward(inp, op=op[0] if op is not None else None)
    output_shape = inp.normalize_bmhk()
    return _fMHA.apply(
        op[0] if op is not None else None,
        op[1] if op is not None else None,
        inp.query, inp.key, inp.value, inp.attn_bias, inp.p, inp.scale,
    )[0].reshape(output_shape)


def memory_efficient_attention(query, key, value, attn_bias=None, p=0.0, scale=None, op=None):
    return _memory_efficient_attention(Inputs(query, key, value, attn_bias, p, scale), op=op)
