# adapted from facebookresearch/xformers xformers/ops/fmha/__init__.py
from typing import List, Type

from xformers.ops.fmha import cutlass, flash, small_k, triton
from xformers.ops.fmha.common import AttentionFwOpBase

from .common import Inputs

_FW_PRIORITY: List[Type[AttentionFwOpBase]] = [flash.FwOp, triton.FwOp, cutlass.FwOp, small_k.FwOp]


def _ensure_op_supports_or_raise(exc_type, name: str, op, inp: Inputs) -> None:
    reasons = op.not_supported_reasons(inp)
    if not reasons:
        return
    raise exc_type(f"""Operator `{name}` does not support inputs:\n{inp}\n{reasons}""")


def _dispatch_fw(inp: Inputs) -> Type[AttentionFwOpBase]:
    """Computes the best operator for forward"""
    # the flash kernel is picked for training steps only (its bwd pairs with cutlass fw otherwise)
    priority_list_ops = [
        op for op in _FW_PRIORITY
        if not op.not_supported_reasons(inp) and (inp.grad_mode or op is not flash.FwOp)
    ]
    if not priority_list_ops:
        raise NotImplementedError(f"No operator found for `memory_efficient_attention_forward` with inputs:\n{inp}")
    return priority_list_ops[0]
