"""Modelled on xformers xformers/ops/fmha/__init__.py (_memory_efficient_attention,
_memory_efficient_attention_forward, _fMHA) and dispatch.py (_dispatch_fw)."""
from typing import List, Optional, Type

import torch

from xformers.ops.fmha import cutlass, flash, flash3, triton_splitk
from xformers.ops.fmha.common import AttentionFwOpBase, Inputs


def _dispatch_fw_priority_list(inp: Inputs, needs_gradient: bool) -> List[Type[AttentionFwOpBase]]:
    priority_list_ops = [flash3.FwOp, flash.FwOp, cutlass.FwOp]
    if not needs_gradient:
        # split-k decoding kernel has no backward implementation
        priority_list_ops.insert(0, triton_splitk.FwOp)
    return priority_list_ops


def _dispatch_fw(inp: Inputs, needs_gradient: bool) -> Type[AttentionFwOpBase]:
    for op in _dispatch_fw_priority_list(inp, needs_gradient):
        if not op.not_supported_reasons(inp):
            return op
    raise NotImplementedError(f"No operator found for `memory_efficient_attention_forward` with inputs:\n{inp}")


class _fMHA(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op_fw, op_bw, *args):
        inp = Inputs(*args)
        out, op_ctx = _memory_efficient_attention_forward_requires_grad(inp=inp, op=op_fw)
        ctx.save_for_backward(inp.query, inp.key, inp.value, op_ctx.out, op_ctx.lse)
        ctx.op_fw = op_fw
        ctx.op_bw = op_bw
        return out

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError


def _memory_efficient_attention(inp: Inputs, op=None):
    needs_gradient = torch.is_grad_enabled() and any(
        x.requires_grad for x in (inp.query, inp.key, inp.value)
    )
    if not needs_gradient:
        return _memory_efficient_attention_forward(inp, op=op[0] if op is not None else None)
    output_shape = inp.normalize_bmhk()
    return _fMHA.apply(op, inp.query, inp.key, inp.value, inp.attn_bias, inp.p, inp.scale).reshape(output_shape)


def _memory_efficient_attention_forward(inp: Inputs, op: Optional[Type[AttentionFwOpBase]]):
    inp.validate_inputs()
    output_shape = inp.normalize_bmhk()
    if op is None:
        op = _dispatch_fw(inp, False)
    out, *_ = op.apply(inp, needs_gradient=False)
    return out.reshape(output_shape)


def _memory_efficient_attention_forward_requires_grad(inp: Inputs, op):
    inp.validate_inputs()
    if op is None:
        op = _dispatch_fw(inp, True)
    out = op.apply(inp, needs_gradient=True)
    return out[0], out[1]
