"""Modelled on bitsandbytes bitsandbytes/autograd/_functions.py (MatMul8bitLt, matmul_4bit)."""
from typing import Optional

import torch

import bitsandbytes.functional as F
from bitsandbytes.autograd._functions import MatmulLtState, MatMul4Bit


class MatMul8bitLt(torch.autograd.Function):
    @staticmethod
    def forward(ctx, A: torch.Tensor, B: torch.Tensor, out=None, bias=None, state: Optional[MatmulLtState] = None):
        state = state or MatmulLtState()
        input_shape = A.shape
        if A.dtype != torch.float16:
            A = A.to(torch.float16)

        # 1. Quantize A; mixed-precision decomposition of outlier columns
        CA, SCA, outlier_cols = F.int8_vectorwise_quant(A, threshold=state.threshold)

        # 2. Quantize B
        if state.has_fp16_weights or state.CB is None:
            state.CB, state.SCB, _ = F.int8_vectorwise_quant(B.to(torch.float16))

        # outlier decomposition is expensive; only do it for fine-tuning steps
        use_outlier_decomp = state.threshold > 0.0 and outlier_cols is not None and torch.is_grad_enabled()

        if use_outlier_decomp:
            subA = A[:, outlier_cols]
            CA[:, outlier_cols] = 0
            output = F.int8_mm_dequant(torch._int_mm(CA, state.CB.t()), SCA, state.SCB, bias=bias)
            output = output.addmm(subA, state.subB if state.subB is not None else B[:, outlier_cols].t())
        else:
            subA = None
            output = F.int8_mm_dequant(torch._int_mm(CA, state.CB.t()), SCA, state.SCB, bias=bias)

        requires_gradient_A = torch.is_grad_enabled() and A.requires_grad
        if requires_gradient_A:
            ctx.tensors = (CA if state.has_fp16_weights else None, subA, A)
            ctx.tensor_states = (SCA, state.SCB)
        else:
            ctx.tensors = (None, None, None)
            ctx.tensor_states = (None, None)
        ctx.state = state
        return output.reshape(*input_shape[:-1], -1)

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError


def matmul_4bit(A: torch.Tensor, B: torch.Tensor, quant_state: F.QuantState, out=None, bias=None):
    assert quant_state is not None
    # gemv_4bit has no autograd formula: single-token inference only
    if A.numel() == A.shape[-1] and not A.requires_grad and not torch.is_grad_enabled():
        if A.shape[-1] % quant_state.blocksize != 0:
            return MatMul4Bit.apply(A, B, out, bias, quant_state)
        out = F.gemv_4bit(A, B.t(), out, state=quant_state)
        if bias is not None:
            out += bias
        return out
    return MatMul4Bit.apply(A, B, out, bias, quant_state)
