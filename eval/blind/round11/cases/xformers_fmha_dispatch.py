# Adapted from facebookresearch/xformers xformers/ops/fmha/__init__.py
# (_memory_efficient_attention, _memory_efficient_attention_forward) and fmha/dispatch.py (_dispatch_fw).
from collections import deque
from typing import Optional, Type

import torch

from xformers.ops.fmha import cutlass, flash, triton_splitk
from xformers.ops.fmha.common import AttentionFwOpBase, Inputs, _fMHA


def _dispatch_fw_priority_list(inp: Inputs, needs_gradient: bool):
    priority_list_ops = deque([flash.FwOp, cutlass.FwOp])
    if not needs_gradient:
        mqa_or_gqa = inp.key.ndim > 3 and inp.key.stride(-2) == 0 and inp.key.shape[-2] > 1
        if not mqa_or_gqa:
            priority_list_ops.appendleft(triton_splitk.FwOp)
    return priority_list_ops


def _dispatch_fw(inp: Inputs, needs_gradient: bool) -> Type[AttentionFwOpBase]:
    for op in _dispatch_fw_priority_list(inp, needs_gradient):
        if op.supports(inp):
            return op
    raise NotImplementedError("No operator found for `memory_efficient_attention_forward`")


def _memory_efficient_attention(inp: Inputs, op=None) -> torch.Tensor:
    if not torch.is_grad_enabled() or all(x.requires_grad is False for x in [inp.query, inp.key, inp.value]):
        return _memory_efficient_attention_forward(inp, op=op[0] if op is not None else None)

    output_shape = inp.normalize_bmhk()
    return _fMHA.apply(op, inp.query, inp.key, inp.value, inp.attn_bias, inp.p, inp.scale).reshape(output_shape)


def _memory_efficient_attention_forward(inp: Inputs, op: Optional[Type[AttentionFwOpBase]]) -> torch.Tensor:
    inp.validate_inputs()
    output_shape = inp.normalize_bmhk()
    if op is None:
        op = _dispatch_fw(inp, needs_gradient=torch.is_grad_enabled())
    out, *_ = op.apply(inp, needs_gradient=False)
    return out.reshape(output_shape)


def memory_efficient_attention(query, key, value, attn_bias=None, p=0.0, scale=None, *, op=None):
    return _memory_efficient_attention(
        Inputs(query=query, key=key, value=value, p=p, attn_bias=attn_bias, scale=scale), op=op
    )
