# adapted from bitsandbytes-foundation/bitsandbytes bitsandbytes/autograd/_functions.py
from dataclasses import dataclass
from math import prod
from typing import Optional
import warnings

import torch

import bitsandbytes.functional as F


class MatMul8bit(torch.autograd.Function):
    @staticmethod
    def forward(ctx, A, B, out=None, quant_type="vector", precision=None):
        if precision is None:
            precision = [8, 8, 8]
        if precision[0] != 8:
            with torch.no_grad():
                output = torch.matmul(A, B)
        else:
            dim = 0 if len(B.shape) == 2 else 1
            qA, SA = F.vectorwise_quant(A, dim=-1, quant_type=quant_type)
            qB, SB = F.vectorwise_quant(B, dim=dim, quant_type=quant_type)
            iout = F.igemm(qA, qB)
            output = F.vectorwise_mm_dequant(iout, SA, SB, A.dtype, quant_type)

        if A.requires_grad or B.requires_grad:
            ctx.save_for_backward(A, B)

        ctx.quant_type = quant_type
        ctx.precision = precision
        return output


@dataclass
class MatmulLtState:
    _tile_indices: Optional[torch.Tensor] = None
    force_no_igemmlt: bool = False
    CB = None
    CxB = None
    SB = None
    SCB = None
    CxBt = None
    SBt = None
    CBt = None
    subB = None
    outlier_pool = None
    has_accumulated_gradients = False
    threshold = 0.0
    idx = None
    is_training = True
    has_fp16_weights = True
    memory_efficient_backward = False
    use_pool = False
    formatB = F.get_special_format_str()

    def reset_grads(self):
        self.CB = None
        self.CxB = None
        self.SB = None
        self.SCB = None
        self.CxBt = None
        self.SBt = None
        self.CBt = None


class MatMul8bitLt(torch.autograd.Function):
    @staticmethod
    def forward(ctx, A, B, out=None, bias=None, state=MatmulLtState):
        using_igemmlt = not state.force_no_igemmlt
        ctx.is_empty = False
        if prod(A.shape) == 0:
            ctx.is_empty = True
            return torch.empty(A.shape[:-1] + B.shape[:1], dtype=A.dtype, device=A.device)

        formatB = state.formatB
        input_shape = A.shape
        A_dtype = torch.float16
        if A.dtype != A_dtype:
            warnings.warn(f"MatMul8bitLt: inputs will be cast from {A.dtype} to {A_dtype} during quantization")
        if len(A.shape) == 3:
            A = A.reshape(-1, A.shape[-1])
        CA, CAt, SCA, SCAt, coo_tensorA = F.double_quant(A.to(A_dtype), threshold=state.threshold)

        # 2. Quantize B
        if state.has_fp16_weights:
            has_grad = True if (getattr(B, "grad", None) is not None) else False
            is_transposed = not B.is_contiguous() and B.shape[0] == B.stride(1)
            if is_transposed:
                B = B.contiguous()

            if (state.is_training and not has_grad) or state.CxB is None:
                state.reset_grads()
                (CB, state.CBt, state.SCB, state.SCBt, coo_tensorB) = F.double_quant(B.to(torch.float16))
                if using_igemmlt:
                    state.CxB, state.SB = F.transform(CB, to_order=formatB)
                else:
                    state.CB = CB
        else:
            has_grad = False

        shapeB = state.SB[0] if state.SB else B.shape
        output_shape = (input_shape[0], input_shape[1], shapeB[0]) if len(input_shape) == 3 else (input_shape[0], shapeB[0])

        C32A, SA = F.transform(CA, "col32")
        out32, Sout32 = F.igemmlt(C32A, state.CxB, SA, state.SB)
        output = F.mm_dequant(out32, Sout32, SCA, state.SCB, bias=bias).to(A.dtype)

        ctx.state = state
        ctx.formatB = formatB
        ctx.grad_shape = input_shape
        if any(ctx.needs_input_grad[:2]):
            ctx.tensors = (CAt, None, A)
            ctx.tensor_states = (SCAt, state.idx)
        else:
            ctx.tensors = [None, None, A]
            ctx.tensor_states = (None, None)
            ctx.save_for_backward(None, None)
        return output.view(output_shape)


def matmul(A: torch.Tensor, B: torch.Tensor, out=None, state: Optional[MatmulLtState] = None,
           threshold=0.0, bias=None):
    state = state or MatmulLtState()
    if threshold > 0.0:
        state.threshold = threshold
    # re-quantize the fp16 weight every step only while it can still change
    state.is_training = torch.is_grad_enabled()
    return MatMul8bitLt.apply(A, B, out, bias, state)
