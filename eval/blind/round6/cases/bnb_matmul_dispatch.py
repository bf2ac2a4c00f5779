"""Quantized matmul entry points for 8-bit and 4-bit linear layers."""
import warnings
from typing import Optional

import torch

import bitsandbytes.functional as F
from bitsandbytes.autograd._functions import MatMul4Bit, MatMul8bitLt, MatmulLtState


def _int8_without_outliers(A, B, state: MatmulLtState, bias=None):
    CA, SCA, _ = F.int8_vectorwise_quant(A.to(torch.float16), threshold=0.0)
    out = F.int8_mm_dequant(F.int8_linear_matmul(CA, state.CB), SCA, state.SCB, bias=bias)
    return out.to(A.dtype)


def matmul(A: torch.Tensor, B: torch.Tensor, out: Optional[torch.Tensor] = None,
           state: Optional[MatmulLtState] = None, threshold: float = 0.0, bias: Optional[torch.Tensor] = None):
    state = state or MatmulLtState()
    if threshold > 0.0:
        state.threshold = threshold
    decompose_outliers = state.threshold > 0.0 and torch.is_grad_enabled()
    if not decompose_outliers and not state.has_fp16_weights and state.CB is not None:
        return _int8_without_outliers(A, B, state, bias=bias)
    return MatMul8bitLt.apply(A, B, out, bias, state)


def matmul_4bit(A: torch.Tensor, B: torch.Tensor, quant_state: F.QuantState,
                out: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None):
    assert quant_state is not None
    if A.numel() == A.shape[-1] and not torch.is_grad_enabled():
        if A.shape[-1] % quant_state.blocksize != 0:
            warnings.warn(
                f"Some matrices hidden dimension is not a multiple of {quant_state.blocksize} "
                "and efficient inference kernels are not supported for these (slow)."
            )
            return MatMul4Bit.apply(A, B, out, bias, quant_state)
        out = F.gemv_4bit(A, B.t(), out, state=quant_state)
        if bias is not None:
            out += bias
        return out
    return MatMul4Bit.apply(A, B, out, bias, quant_state)
