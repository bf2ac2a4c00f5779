# adapted from bitsandbytes-foundation/bitsandbytes bitsandbytes/autograd/_functions.py
import torch
import bitsandbytes.functional as F


class MatMul8bitLt(torch.autograd.Function):
    @staticmethod
    def forward(ctx, A, B, out=None, bias=None, state=None):
        use_outlier_decomp = state.threshold > 0.0 and torch.is_grad_enabled()
        CA, SCA, outlier_cols = F.int8_vectorwise_quant(A.to(torch.float16), threshold=state.threshold)
        if use_outlier_decomp and outlier_cols is not None:
            subA = A[:, outlier_cols]
            out_outliers = torch.matmul(subA, B.t()[outlier_cols])
        else:
            out_outliers = None
        output = F.int8_mm_dequant(F.int8_linear_matmul(CA, state.CB), SCA, state.SCB, bias=bias)
        if out_outliers is not None:
            output = output + out_outliers
        if A.requires_grad:
            ctx.save_for_backward(CA, B)
        else:
            ctx.save_for_backward(None, B)
        ctx.state = state
        return output
