from dataclasses import dataclass
from typing import Optional

import torch

import bitsandbytes.functional as F


@dataclass
class MatmulLtState:
    CB: Optional[torch.Tensor] = None
    SCB: Optional[torch.Tensor] = None
    threshold: float = 0.0
    has_fp16_weights: bool = True
    is_training: bool = True
    extract_outliers: bool = False
    idx: Optional[torch.Tensor] = None


def _outlier_extraction_enabled(state: MatmulLtState) -> bool:
    try:
        grad_on = torch._C.is_grad_enabled()
    except AttributeError:
        grad_on = True
    return state.threshold > 0.0 and grad_on


def _mm_int8_forward(A, B, out, bias, state: MatmulLtState):
    input_shape = A.shape
    if A.dtype != torch.float16:
        A = A.to(torch.float16)
    if len(input_shape) == 3:
        A = A.reshape(-1, input_shape[-1])

    CA, SCA, outlier_cols = F.int8_vectorwise_quant(A, threshold=state.threshold)

    if state.has_fp16_weights or state.CB is None:
        state.CB, state.SCB, _ = F.int8_vectorwise_quant(B.to(torch.float16))

    if state.extract_outliers and outlier_cols is not None:
        state.idx = outlier_cols
        subA = A[:, outlier_cols]
        CA[:, outlier_cols] = 0
        output, _ = F.int8_mixed_scaled_mm(
            A, CA, state.CB, SCA, state.SCB, outlier_cols, bias,
            subA=subA, subB=F.int8_vectorwise_dequant(state.CB[:, outlier_cols], state.SCB),
        )
    else:
        output = F.int8_scaled_mm(CA, state.CB, SCA, state.SCB, bias=bias, dtype=A.dtype)

    output = output.reshape(*input_shape[:-1], -1)
    if out is not None:
        out.copy_(output)
        output = out
    return output, (CA, SCA)


class MatMul8bitLt(torch.autograd.Function):
    @staticmethod
    def forward(ctx, A, B, out=None, bias=None, state: Optional[MatmulLtState] = None):
        state = state or MatmulLtState()
        ctx.state = state
        if A.numel() == 0:
            ctx.is_empty = True
            return torch.empty(A.shape[:-1] + B.shape[:1], dtype=A.dtype, device=A.device)
        ctx.is_empty = False
        output, (CA, SCA) = _mm_int8_forward(A, B, out, bias, state)
        ctx.dtype_A, ctx.dtype_bias = A.dtype, None if bias is None else bias.dtype
        if any(ctx.needs_input_grad[:2]):
            ctx.tensors = (CA, A)
            ctx.tensor_states = (SCA, state.idx)
        else:
            ctx.tensors = [None, None]
            ctx.tensor_states = (None, None)
        return output


def matmul(
    A: torch.Tensor,
    B: torch.Tensor,
    out: Optional[torch.Tensor] = None,
    state: Optional[MatmulLtState] = None,
    threshold: float = 0.0,
    bias: Optional[torch.Tensor] = None,
):
    state = state or MatmulLtState()
    if threshold > 0.0:
        state.threshold = threshold
    state.extract_outliers = _outlier_extraction_enabled(state)
    if torch.is_grad_enabled():
        return MatMul8bitLt.apply(A, B, out, bias, state)
    output, _ = _mm_int8_forward(A, B, out, bias, state)
    return output
