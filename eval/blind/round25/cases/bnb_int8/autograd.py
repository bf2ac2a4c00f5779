# adapted from bitsandbytes-foundation/bitsandbytes bitsandbytes/autograd/_functions.py
import torch

from . import functional as F
from .state import MatmulLtState


class MatMul8bitLt(torch.autograd.Function):
    @staticmethod
    def forward(ctx, A, B, out=None, bias=None, state=None):
        state = state or MatmulLtState()
        CA, SCA, outlier_cols = F.int8_double_quant(A.to(torch.float16), state.threshold, state)
        output = torch.matmul(CA.float() * SCA.unsqueeze(1) / 127.0, B.t().float()).to(A.dtype)
        if bias is not None:
            output = output + bias
        if state.grad_at_init:
            ctx.state = state
            ctx.save_for_backward(A, B)
        return output


def matmul(A, B, out=None, state=None, threshold=0.0, bias=None):
    state = state or MatmulLtState(threshold=threshold)
    return MatMul8bitLt.apply(A, B, out, bias, state)
