# Adapted from bitsandbytes-foundation/bitsandbytes bitsandbytes/autograd/_functions.py (matmul_4bit)
import torch


def dequantize_4bit(B, quant_state):
    return (B.float() * quant_state["absmax"]).to(quant_state["dtype"])


def gemv_4bit(A, B, state):
    return (A.float() @ dequantize_4bit(B, state).float().t()).to(A.dtype)


class MatMul4Bit(torch.autograd.Function):
    @staticmethod
    def forward(ctx, A, B, out=None, bias=None, quant_state=None):
        output = torch.nn.functional.linear(A, dequantize_4bit(B, quant_state).to(A.dtype), bias)
        if ctx is not None:
            ctx.state = quant_state
            ctx.tensors = (A, B)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        A, B = ctx.tensors
        return grad_output @ dequantize_4bit(B, ctx.state).to(grad_output.dtype), None, None, None, None


def matmul_4bit(A, B, quant_state, out=None, bias=None):
    if A.numel() == A.shape[-1] and not torch.is_grad_enabled():
        out = gemv_4bit(A, B.t(), quant_state)
        if bias is not None:
            out += bias
        return out
    if torch.is_grad_enabled() and A.requires_grad:
        return MatMul4Bit.apply(A, B, out, bias, quant_state)
    return MatMul4Bit.forward(None, A, B, out, bias, quant_state)
