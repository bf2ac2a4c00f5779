# adapted from bitsandbytes-foundation/bitsandbytes bitsandbytes/autograd/_functions.py
from dataclasses import dataclass
from typing import Optional
import warnings

import torch

import bitsandbytes.functional as F


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

    def reset_grads(self):
        self.CB = None
        self.CxB = None
        self.SB = None
        self.SCB = None
        self.CxBt = None
        self.SBt = None
        self.CBt = None


class MatMul8bit(torch.autograd.Function):
    @staticmethod
    def forward(ctx, A, B, out=None, quant_type="vector", precision=None):
        if precision is None:
            precision = [8, 8, 8]
        qA, SA = F.vectorwise_quant(A, dim=-1, quant_type=quant_type)
        qB, SB = F.vectorwise_quant(B, dim=0, quant_type=quant_type)
        iout = F.igemm(qA, qB)
        output = F.vectorwise_mm_dequant(iout, SA, SB, A.dtype, quant_type)
        if A.requires_grad or B.requires_grad:
            ctx.save_for_backward(A, B)
        ctx.quant_type = quant_type
        ctx.precision = precision
        return output


class MatMul8bitLt(torch.autograd.Function):
    @staticmethod
    def forward(ctx, A, B, out=None, bias=None, state=MatmulLtState):
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
            if (state.is_training and not has_grad) or state.CB is None:
                state.reset_grads()
                state.CB, state.CBt, state.SCB, state.SCBt, _ = F.double_quant(B.to(torch.float16))
        else:
            has_grad = False

        output = torch.nn.functional.linear(A, state.CB.to(A.dtype))
        output = output.mul_(state.SCB.unsqueeze(0).mul(1.0 / 127.0))
        if bias is not None:
            output = output.add_(bias)
        ctx.state = state
        ctx.save_for_backward(CAt, SCAt)
        if len(input_shape) == 3:
            return output.reshape(input_shape[0], input_shape[1], -1)
        return output


class Linear8bitLt(torch.nn.Linear):
    def __init__(self, input_features, output_features, bias=True, has_fp16_weights=True, threshold=0.0):
        super().__init__(input_features, output_features, bias)
        self.state = MatmulLtState()
        self.state.threshold = threshold
        self.state.has_fp16_weights = has_fp16_weights

    def forward(self, x: torch.Tensor):
        # weights are re-quantized whenever they may have been updated
        self.state.is_training = torch.is_grad_enabled()
        if self.bias is not None and self.bias.dtype != x.dtype:
            self.bias.data = self.bias.data.to(x.dtype)
        return MatMul8bitLt.apply(x, self.weight, None, self.bias, self.state)
