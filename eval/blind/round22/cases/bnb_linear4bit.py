# adapted from bitsandbytes-foundation/bitsandbytes bitsandbytes/nn/modules.py
import warnings

import torch
from torch import nn

import bitsandbytes as bnb


class Linear4bit(nn.Linear):
    def __init__(self, input_features, output_features, bias=True, compute_dtype=None,
                 compress_statistics=True, quant_type="fp4", quant_storage=torch.uint8, device=None):
        super().__init__(input_features, output_features, bias, device)
        self.compute_dtype = compute_dtype
        self.compute_type_is_set = False if compute_dtype is None else True
        self.quant_state = None
        self.quant_storage = quant_storage

    def set_compute_type(self, x):
        if x.dtype in [torch.float32, torch.bfloat16] and torch.is_grad_enabled():
            # the input is in a dtype that is safe to compute in, we switch
            # to this type for speed and stability
            self.compute_dtype = x.dtype
        elif x.dtype == torch.float16:
            if self.compute_dtype in [None, torch.float32] and (x.numel() == x.shape[-1]):
                warnings.warn(
                    "Input type into Linear4bit is torch.float16, but bnb_4bit_compute_dtype=torch.float32 (default). "
                    "This will lead to slow inference.",
                )
        self.compute_type_is_set = True

    def forward(self, x: torch.Tensor):
        fix_4bit_weight_quant_state_from_module(self)
        if getattr(self.weight, "quant_state", None) is None:
            print("FP4 quantization state not initialized.")
        if not self.compute_type_is_set:
            self.set_compute_type(x)
        inp_dtype = x.dtype
        if self.compute_dtype is not None:
            x = x.to(self.compute_dtype)
        bias = None if self.bias is None else self.bias.to(self.compute_dtype)
        weight = self.weight.t()
        if x.numel() == x.shape[-1] and not torch.is_grad_enabled():
            # single-token decode: use the inference gemv kernel
            out = bnb.functional.gemv_4bit(x, weight, state=self.weight.quant_state)
            if bias is not None:
                out += bias
            return out.to(inp_dtype)
        return bnb.matmul_4bit(x, weight, bias=bias, quant_state=self.weight.quant_state).to(inp_dtype)
