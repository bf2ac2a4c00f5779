# adapted from bitsandbytes-foundation/bitsandbytes bitsandbytes/autograd/_functions.py
from dataclasses import dataclass
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
    subB = None
    threshold = 0.0
    idx = None
    is_training = True
    has_fp16_weights = True
    formatB = F.get_special_format_str()


class MatMul8bitLt(torch.autograd.Function):
    @staticmethod
    def forward(ctx, A, B, out=None, bias=None, state=MatmulLtState):
        # 1. Quantize A
        # 2. Quantize B
        # 3. Matmul
        # 4. Mixed-precision decomposition matmul
        # 5. Save state
        input_shape = A.shape
        A_dtype = torch.float16
        if A.dtype != A_dtype:
            warnings.warn(f"MatMul8bitLt: inputs will be cast from {A.dtype} to {A_dtype} during quantization")

        if len(A.shape) == 3:
            A = A.reshape(-1, A.shape[-1])
        CA, CAt, SCA, SCAt, coo_tensorA = F.double_quant(A.to(A_dtype), threshold=state.threshold)

        subA = None
        if state.threshold > 0.0 and coo_tensorA is not None and state.is_training:
            idx = torch.unique(coo_tensorA.colidx).long()
            CA[:, idx] = 0
            CAt[:, idx] = 0
            subA = A[:, idx]
            state.subB = B[:, idx].t().contiguous()
            state.idx = idx

        if state.CB is None:
            CB, state.CBt, state.SCB, state.SCBt, coo_tensorB = F.double_quant(B.to(torch.float16))
            state.CB = CB

        output = torch.nn.functional.linear(CA.to(A.dtype), state.CB.to(A.dtype))
        output = output.mul_(SCA.unsqueeze(1).mul(state.SCB.unsqueeze(0)).mul(1.0 / (127.0 * 127.0)))
        if bias is not None:
            output = output.add_(bias)

        # 4. Mixed-precision decomposition matmul
        if subA is not None:
            output += torch.matmul(subA, state.subB)

        ctx.state = state
        ctx.tensor_states = (CAt, subA)
        ctx.save_for_backward(A, B)
        return output.reshape(*input_shape[:-1], -1)


def matmul(
    A: torch.Tensor,
    B: torch.Tensor,
    out: Optional[torch.Tensor] = None,
    state: Optional[MatmulLtState] = None,
    threshold=0.0,
    bias=None,
):
    state = state or MatmulLtState()
    if threshold > 0.0:
        state.threshold = threshold
    state.is_training = torch.is_grad_enabled()
    return MatMul8bitLt.apply(A, B, out, bias, state)
