from typing import List, Optional, Sequence, Tuple, Type

import torch

from xformers.ops.fmha.common import AttentionFwOpBase, AttentionBwOpBase, Inputs, Context
from xformers.ops.fmha import cutlass, flash, flash3, ck, triton_splitk

_FW_PRIORITY: Sequence[Type[AttentionFwOpBase]] = (flash3.FwOp, flash.FwOp, cutlass.FwOp, ck.FwOp)
_FW_ONLY_PRIORITY: Sequence[Type[AttentionFwOpBase]] = (triton_splitk.FwOp,)


def _run_priority_list(name: str, priority_list, inp: Inputs):
    not_supported_reasons: List[List[str]] = []
    for op in priority_list:
        not_supported = op.not_supported_reasons(inp)
        if not not_supported:
            return op
        not_supported_reasons.append(not_supported)
    msg = f"No operator found for `{name}` with inputs:\n{inp}"
    for op, why in zip(priority_list, not_supported_reasons):
        msg += f"\n`{op.NAME}` is not supported because:\n    " + "\n    ".join(why)
    raise NotImplementedError(msg)


def _dispatch_fw(inp: Inputs, needs_gradient: bool) -> Type[AttentionFwOpBase]:
    priority_list_ops = list(_FW_PRIORITY)
    if not needs_gradient:
        priority_list_ops = list(_FW_ONLY_PRIORITY) + priority_list_ops
    return _run_priority_list("memory_efficient_attention_forward", priority_list_ops, inp)


def _memory_efficient_attention_forward(inp: Inputs, op: Optional[Type[AttentionFwOpBase]]) -> torch.Tensor:
    inp.validate_inputs()
    output_shape = inp.normalize_bmhk()
    if op is None:
        op = _dispatch_fw(inp, False)
    out, *_ = op.apply(inp, needs_gradient=False)
    return out.reshape(output_shape)


def _memory_efficient_attention_forward_requires_grad(inp: Inputs, op, needs_gradient: bool) -> Tuple[torch.Tensor, Optional[Context]]:
    inp.validate_inputs()
    output_shape = inp.normalize_bmhk()
    if op is None:
        op = _dispatch_fw(inp, needs_gradient)
    out = op.apply(inp, needs_gradient=needs_gradient)
    return out[0].reshape(output_shape), out[1]


class _fMHA(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op_fw, op_bw, needs_gradient, *args):
        inp = Inputs(*args)
        out, op_ctx = _memory_efficient_attention_forward_requires_grad(inp, op_fw, needs_gradient)
        ctx.save_for_backward(inp.query, inp.key, inp.value, op_ctx.out, op_ctx.lse)
        ctx.op_bw = op_bw
        ctx.p = inp.p
        return out

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError


def memory_efficient_attention(query, key, value, attn_bias=None, p: float = 0.0,
                               scale: Optional[float] = None, *, op=None, output_dtype=None):
    grad_mode = torch.is_grad_enabled()
    inputs_require_grad = any(x.requires_grad for x in (query, key, value))
    effective_p = p if grad_mode else 0.0
    inp = Inputs(query=query, key=key, value=value, attn_bias=attn_bias, p=effective_p,
                 scale=scale, output_dtype=output_dtype)
    op_fw = op[0] if isinstance(op, tuple) else op
    op_bw = op[1] if isinstance(op, tuple) else None
    if not (grad_mode and inputs_require_grad):
        return _memory_efficient_attention_forward(inp, op=op_fw)
    return _fMHA.apply(op_fw, op_bw, grad_mode, inp.query, inp.key, inp.value, inp.attn_bias, inp.p, inp.scale)
