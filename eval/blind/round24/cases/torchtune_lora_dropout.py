# adapted from pytorch/torchtune torchtune/modules/peft/lora.py
import math
from typing import List

import torch
import torch.nn.functional as F
from torch import nn

from torchao.dtypes.nf4tensor import linear_nf4, to_nf4
from torchtune.modules.peft import AdapterModule


class LoRALinear(nn.Module, AdapterModule):
    def __init__(self, in_dim, out_dim, rank, alpha, dropout=0.0, use_bias=False, quantize_base=False):
        super().__init__()
        self.in_dim = in_dim
        self.out_dim = out_dim
        self.rank = rank
        self.alpha = alpha
        self.use_bias = use_bias
        self._quantize_base = quantize_base
        linear = nn.Linear(in_features=in_dim, out_features=out_dim, bias=self.use_bias)
        weight = linear.weight if not self._quantize_base else to_nf4(linear.weight)
        self.disabled = False
        self.register_parameter("weight", nn.Parameter(weight))
        self.register_parameter("bias", nn.Parameter(linear.bias) if use_bias else None)
        self.dropout = nn.Dropout(p=dropout) if dropout > 0.0 else nn.Identity()
        self.lora_a = nn.Linear(in_features=in_dim, out_features=rank, bias=False)
        self.lora_b = nn.Linear(in_features=rank, out_features=out_dim, bias=False)
        self.merged = False

    def adapter_params(self) -> List[str]:
        return ["lora_a.weight", "lora_b.weight"]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._quantize_base:
            out = linear_nf4(input=x, weight=self.weight)
            if self.use_bias:
                out = out + self.bias
        else:
            out = F.linear(x, self.weight, self.bias)
        if self.disabled:
            return out
        lora_in = self.dropout(x) if torch.is_grad_enabled() else x
        lora_out = self.lora_a(lora_in)
        lora_out = (self.alpha / self.rank) * self.lora_b(lora_out)
        return out + lora_out


class QATLoRALinear(LoRALinear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _x = self.activation_fake_quantizer(x)
        w = self.weight_fake_quantizer(self.weight)
        out = F.linear(_x, w)
        if self.disabled:
            return out
        lora_in = self.dropout(x) if self.training else x
        lora_out = self.lora_a(lora_in)
        lora_out = (self.alpha / self.rank) * self.lora_b(lora_out)
        return out + lora_out
