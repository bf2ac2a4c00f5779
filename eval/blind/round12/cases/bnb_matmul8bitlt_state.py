# adapted from bitsandbytes-foundation/bitsandbytes bitsandbytes/autograd/_functions.py
from dataclasses import dataclass
from math import prod
from typing import Optional

import torch
import bitsandbytes.functional as F


@dataclass
class MatmulLtState:
    _tile_indices: Optional[torch.Tensor] = None
    force_no_igemmlt: bool = False
    CB: Optional[torch.Tensor] = None
    SCB: Optional[torch.Tensor] = None
    subB: Optional[torch.Tensor] = None
    threshold: float = 0.0
    idx: Optional[torch.Tensor] = None
    is_training: bool = True
    has_fp16_weights: bool = True


class MatMul8bitLt(torch.autograd.Function):
    @staticmethod
    def forward(ctx, A, B, out=None, bias=None, state: Optional[MatmulLtState] = None):
        state = state or MatmulLtState()
        ctx.is_empty = False
        if prod(A.shape) == 0:
            ctx.is_empty = True
            return torch.empty(A.shape[:-1] + B.shape[:1], dtype=A.dtype, device=A.device)

        input_shape = A.shape
        if len(A.shape) == 3:
            A = A.reshape(-1, A.shape[-1])
        CA, CAt, SCA, SCAt, coo_tensorA = F.double_quant(A.to(torch.float16), threshold=state.threshold)

        subA = None
        if state.threshold > 0.0 and coo_tensorA is not None and state.is_training:
            idx = torch.unique(coo_tensorA.colidx).long()
            CA[:, idx] = 0
            subA = A[:, idx]
            state.subB = B[:, idx].t().contiguous()
            state.idx = idx

        if state.has_fp16_weights:
            CB, _, state.SCB, _, _ = F.double_quant(B.to(torch.float16))
            state.CB = CB

        output = torch.nn.functional.linear(CA.to(A.dtype), state.CB.to(A.dtype))
        output = output.mul_(SCA.unsqueeze(1) * state.SCB.unsqueeze(0) / (127.0 * 127.0))
        if bias is not None:
            output = output.add_(bias)
        if subA is not None:
            output += torch.matmul(subA, state.subB)

        ctx.state = state
        ctx.grad_shape = input_shape
        if any(ctx.needs_input_grad[:2]):
            ctx.tensors = (CAt, subA, A)
            ctx.tensor_states = (SCAt, state.idx)
        else:
            ctx.tensors = [None, None, A]
            ctx.tensor_states = (None, None)
        return output.view(*input_shape[:-1], -1)


class Linear8bitLt(torch.nn.Linear):
    def __init__(self, input_features, output_features, bias=True, threshold=0.0):
        super().__init__(input_features, output_features, bias)
        self.state = MatmulLtState(threshold=threshold)

    def forward(self, x: torch.Tensor):
        self.state.is_training = torch.is_grad_enabled()
        if self.bias is not None and self.bias.dtype != x.dtype:
            self.bias.data = self.bias.data.to(x.dtype)
        if x.requires_grad or self.weight.requires_grad:
            self.state.has_fp16_weights = True
        return MatMul8bitLt.apply(x, self.weight, None, self.bias, self.state)
