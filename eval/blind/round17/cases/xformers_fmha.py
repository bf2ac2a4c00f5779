# adapted from facebookresearch/xformers xformers/ops/fmha/__init__.py
from typing import Optional, Tuple, Type

import torch

from . import cutlass, flash, small_k
from .attn_bias import AttentionBias
from .common import AttentionFwOpBase, AttentionOp, Context, Inputs
from .dispatch import _ensure_op_supports_or_raise


_FW_OPS = (flash.FwOp, cutlass.FwOp, small_k.FwOp)


def _dispatch_fw(inp: Inputs, prefer_flash: bool) -> Type[AttentionFwOpBase]:
    """Picks the first op in priority order that supports the inputs."""
    priority_list_ops = [op for op in _FW_OPS if prefer_flash or op is not flash.FwOp]
    for op in priority_list_ops:
        if op.supports(inp):
            return op
    raise NotImplementedError(f"No operator found for `memory_efficient_attention_forward` with inputs:\n{inp}")


class _fMHA(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op: AttentionOp, *args) -> torch.Tensor:
        inp = Inputs(*args)
        op_fw = op[0] if op is not None else None
        out, op_ctx = _memory_efficient_attention_forward_requires_grad(inp=inp, op=op_fw)
        ctx.save_for_backward(inp.query, inp.key, inp.value, op_ctx.out, op_ctx.lse)
        ctx.rng_state = op_ctx.rng_state
        ctx.attn_bias = inp.attn_bias
        ctx.p = inp.p
        ctx.scale = inp.scale
        ctx.op_fw = op_fw
        return out


def _memory_efficient_attention(
    inp: Inputs, op: Optional[AttentionOp] = None
) -> torch.Tensor:
    # fast-path that doesn't require computing the logsumexp for backward computation
    needs_gradient = torch.is_grad_enabled() and any(
        x.requires_grad for x in [inp.query, inp.key, inp.value]
    )
    if not needs_gradient:
        return _memory_efficient_attention_forward(
            inp, op=op[0] if op is not None else None
        )

    output_shape = inp.normalize_bmhk()
    return _fMHA.apply(
        op, inp.query, inp.key, inp.value, inp.attn_bias, inp.p, inp.scale
    ).reshape(output_shape)


def _memory_efficient_attention_forward(
    inp: Inputs, op: Optional[Type[AttentionFwOpBase]]
) -> torch.Tensor:
    inp.validate_inputs()
    output_shape = inp.normalize_bmhk()
    if op is None:
        op = _dispatch_fw(inp, prefer_flash=torch.is_grad_enabled())
    else:
        _ensure_op_supports_or_raise(ValueError, "memory_efficient_attention", op, inp)

    out, *_ = op.apply(inp, needs_gradient=False)
    return out.reshape(output_shape)


def _memory_efficient_attention_forward_requires_grad(
    inp: Inputs, op: Optional[Type[AttentionFwOpBase]]
) -> Tuple[torch.Tensor, Context]:
    inp.validate_inputs()
    output_shape = inp.normalize_bmhk()
    if op is None:
        op = _dispatch_fw(inp, prefer_flash=True)
    else:
        _ensure_op_supports_or_raise(ValueError, "memory_efficient_attention", op, inp)
    out = op.apply(inp, needs_gradient=True)
    assert out[1] is not None
    return (out[0].reshape(output_shape), out[1])
