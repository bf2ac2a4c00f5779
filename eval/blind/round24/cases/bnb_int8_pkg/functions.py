# adapted from bitsandbytes-foundation/bitsandbytes bitsandbytes/nn/modules.py
import torch

import bitsandbytes.functional as F

from .state import MatmulLtState


class MatMul8bitLt(torch.autograd.Function):
    @staticmethod
    def forward(ctx, A, B, out=None, bias=None, state: MatmulLtState = None):
        CA, SCA, outlier_cols = F.int8_vectorwise_quant(A.to(torch.float16), threshold=state.threshold)
        if state.threshold > 0.0 and state.is_training:
            # mixed int8/fp16 decomposition for outlier columns
            subA = A[:, outlier_cols]
            output = F.int8_mixed_scaled_mm(CA, state.CB, SCA, state.SCB, subA, outlier_cols, bias=bias)
        else:
            output = F.int8_scaled_mm(CA, state.CB, SCA, state.SCB, bias=bias)
        if state.is_training and ctx.needs_input_grad[0]:
            ctx.tensors = (A, B)
        else:
            ctx.tensors = (None, None)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError


def matmul(A, B, out=None, state: MatmulLtState = None, bias=None):
    return MatMul8bitLt.apply(A, B, out, bias, state)
