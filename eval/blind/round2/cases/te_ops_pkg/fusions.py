# Modelled on TransformerEngine 2.x transformer_engine/pytorch/ops/fused/userbuffers_forward_linear.py
from typing import Any

import torch

from transformer_engine.pytorch.ops.basic import BasicLinear, Bias, ReduceScatter
from transformer_engine.pytorch.ops.fused.userbuffers_forward_linear import UserbuffersForwardLinear
from transformer_engine.pytorch.ops.op import FusibleOperation
from transformer_engine.pytorch.quantization import FP8GlobalStateManager


def fuse_userbuffers_forward_linear(ops: list[FusibleOperation], **unused: Any) -> list[FusibleOperation]:
    """Substitute linear (+bias) (+reduce-scatter) with a Userbuffers comm/GEMM-overlapped op."""
    recipe = unused.get("recipe", None)
    if recipe is not None:
        backward_override = recipe.backward_override
    elif FP8GlobalStateManager.is_fp8_enabled():
        backward_override = FP8GlobalStateManager.get_fp8_recipe().backward_override
    else:
        backward_override = None
    if backward_override is not None:
        return ops

    if not torch.distributed.is_initialized() or torch.distributed.get_world_size() == 1:
        return ops
    if not unused.get("is_grad_enabled", True):
        return ops

    out = []
    window = []
    while ops:
        out.extend(window)
        window, ops = ops[:1], ops[1:]
        if not isinstance(window[0], BasicLinear):
            continue
        linear = window[0]
        if linear._userbuffers_options is None or linear.tensor_parallel_mode not in ("row", "column"):
            continue
        bias = None
        if ops and isinstance(ops[0], Bias):
            bias = ops[0]
            window.append(ops[0])
            ops = ops[1:]
        reduce_scatter = None
        if linear.tensor_parallel_mode == "row" and ops and isinstance(ops[0], ReduceScatter):
            reduce_scatter = ops[0]
            window.append(ops[0])
            ops = ops[1:]
        op = UserbuffersForwardLinear(linear=linear, bias=bias, reduce_scatter=reduce_scatter)
        window = [op]
    out.extend(window)
    return out


def fuse_forward_linear_bias_add(ops: list[FusibleOperation], **unused: Any) -> list[FusibleOperation]:
    """Fuse linear + bias + residual add into the GEMM epilogue (not shown)."""
    return ops


FORWARD_FUSIONS = [fuse_userbuffers_forward_linear, fuse_forward_linear_bias_add]
