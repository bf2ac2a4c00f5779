# Adapted from bitsandbytes-foundation/bitsandbytes bitsandbytes/autograd/_functions.py
# (MatMul4Bit.forward and matmul_4bit dispatch).
from math import prod
from typing import Optional
from warnings import warn

import torch

import bitsandbytes.functional as F


class MatMul4Bit(torch.autograd.Function):
    @staticmethod
    def forward(ctx, A, B, out=None, bias=None, quant_state: Optional[F.QuantState] = None):
        if prod(A.shape) == 0:
            B_shape = quant_state.shape
            if A.shape[-1] == B_shape[0]:
                return torch.empty(A.shape[:-1] + B_shape[1:], dtype=A.dtype, device=A.device)
            return torch.empty(A.shape[:-1] + B_shape[:1], dtype=A.dtype, device=A.device)

        output = torch.nn.functional.linear(A, F.dequantize_4bit(B, quant_state).to(A.dtype).t(), bias)

        ctx.state = quant_state
        ctx.dtype_A, ctx.dtype_B, ctx.dtype_bias = A.dtype, B.dtype, None if bias is None else bias.dtype
        if any(ctx.needs_input_grad[:2]):
            ctx.tensors = (None, B)
        else:
            ctx.tensors = (None, None)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        req_gradA, _, _, req_gradBias, _ = ctx.needs_input_grad
        _, B = ctx.tensors
        grad_A, grad_bias = None, None
        if req_gradBias:
            grad_bias = grad_output.sum(0, dtype=ctx.dtype_bias)
        if req_gradA:
            grad_A = torch.matmul(grad_output, F.dequantize_4bit(B, ctx.state).to(grad_output.dtype).t())
        return grad_A, None, None, grad_bias, None


class _NoCtx:
    needs_input_grad = (False, False, False, False, False)


def matmul_4bit(A: torch.Tensor, B: torch.Tensor, quant_state: F.QuantState,
                out: Optional[torch.Tensor] = None, bias=None):
    assert quant_state is not None
    if (A.numel() == A.shape[-1] or A.device.type == "cpu") and A.requires_grad == False:
        if A.shape[-1] % quant_state.blocksize != 0:
            warn(f"Some matrices hidden dimension is not a multiple of {quant_state.blocksize}")
            return MatMul4Bit.apply(A, B, out, bias, quant_state)
        out = F.gemv_4bit(A, B.t(), out, state=quant_state)
        if bias is not None:
            out += bias
        return out
    if torch.is_grad_enabled() and (A.requires_grad or B.requires_grad):
        return MatMul4Bit.apply(A, B, out, bias, quant_state)
    return MatMul4Bit.forward(_NoCtx(), A, B, out, bias, quant_state)
