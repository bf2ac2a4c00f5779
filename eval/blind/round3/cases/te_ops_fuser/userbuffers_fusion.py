# Modelled on transformer_engine/pytorch/ops/fused/userbuffers_forward_linear.py (TransformerEngine 2.x).
from transformer_engine.pytorch.module.base import get_ub
from transformer_engine.pytorch.ops.basic import BasicLinear, Bias, ReduceScatter
from transformer_engine.pytorch.ops.fused.userbuffers_forward_linear import UserbuffersForwardLinear


def _userbuffers_configured(linear: BasicLinear) -> bool:
    return (
        linear.tensor_parallel_mode in ("column", "row")
        and linear.sequence_parallel
        and linear.userbuffers_options is not None
        and get_ub(linear.userbuffers_options["comm_name"] + "_fprop") is not None
    )


def fuse_userbuffers_forward_linear(ops, *, recipe=None, allow_userbuffers: bool = True):
    out = []
    window = []
    while ops:
        op, idxs = ops.pop(0)
        window.append((op, idxs))
        if not isinstance(window[0][0], BasicLinear):
            out.extend(window)
            window = []
            continue
        linear = window[0][0]
        use_ub = allow_userbuffers and _userbuffers_configured(linear)
        if not use_ub:
            out.extend(window)
            window = []
            continue
        bias = None
        if ops and isinstance(ops[0][0], Bias):
            bias = ops.pop(0)
            window.append(bias)
        reduce_scatter = None
        if linear.tensor_parallel_mode == "row" and ops and isinstance(ops[0][0], ReduceScatter):
            reduce_scatter = ops.pop(0)
            window.append(reduce_scatter)
        fused = UserbuffersForwardLinear(
            linear=linear,
            bias=bias[0] if bias is not None else None,
            reduce_scatter=reduce_scatter[0] if reduce_scatter is not None else None,
        )
        out.append((fused, tuple(i for _, ids in window for i in ids)))
        window = []
    out.extend(window)
    return out
