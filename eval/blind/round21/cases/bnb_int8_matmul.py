# adapted from bitsandbytes-foundation/bitsandbytes bitsandbytes/autograd/_functions.py
from dataclasses import dataclass
from typing import Optional

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


def supports_igemmlt(device: torch.device) -> bool:
    if device == torch.device("cpu"):
        return True
    if torch.cuda.get_device_capability(device=device) < (7, 5):
        return False
    return True


@dataclass
class MatmulLtState:
    _tile_indices: Optional[torch.Tensor] = None
    force_no_igemmlt: bool = False
    CB = None
    CxB = None
    SB = None
    SCB = None
    threshold = 0.0
    idx = None
    is_training = True
    has_fp16_weights = True


class MatMul8bitLt(torch.autograd.Function):
    @staticmethod
    def forward(ctx, A, B, out=None, bias=None, state=MatmulLtState):
        using_igemmlt = supports_igemmlt(A.device) and not state.force_no_igemmlt
        CA, CAt, SCA, SCAt, coo_tensorA = F.double_quant(A.to(torch.float16), threshold=state.threshold)
        if using_igemmlt:
            C32A, SA = F.transform(CA, "col32")
            out32, Sout32 = F.igemmlt(C32A, state.CxB, SA, state.SB)
            output = F.mm_dequant(out32, Sout32, SCA, state.SCB, bias=bias).to(A.dtype)
        else:
            output = torch.nn.functional.linear(A, state.CB.to(A.dtype))
            output = output.mul_(state.SCB.unsqueeze(0).mul(1.0 / 127.0))
            if bias is not None:
                output = output.add_(bias)
        ctx.state = state
        return output


def matmul(A: torch.Tensor, B: torch.Tensor, out: Optional[torch.Tensor] = None,
           state: Optional[MatmulLtState] = None, threshold=0.0, bias=None):
    state = state or MatmulLtState()
    if threshold > 0.0:
        state.threshold = threshold
    # the int8 igemmlt path is only kept for training runs
    state.force_no_igemmlt = state.force_no_igemmlt or not torch.is_grad_enabled()
    return MatMul8bitLt.apply(A, B, out, bias, state)
