# adapted from Lightning-AI/litgpt litgpt/lora.py
import math
from typing import Any

import torch
import torch.nn as nn


class LoRALayer(nn.Module):
    def __init__(self, r: int, lora_alpha: int, lora_dropout: float):
        super().__init__()
        assert r >= 0
        self.r = r
        self.lora_alpha = lora_alpha
        if lora_dropout > 0.0:
            self.lora_dropout = nn.Dropout(p=lora_dropout)
        else:
            self.lora_dropout = lambda x: x
        self.merged = False


class LoRALinear(LoRALayer):
    def __init__(self, in_features: int, out_features: int, r: int = 0, lora_alpha: int = 1,
                 lora_dropout: float = 0.0, **kwargs: Any):
        super().__init__(r=r, lora_alpha=lora_alpha, lora_dropout=lora_dropout)
        self.linear = torch.nn.Linear(in_features, out_features, **kwargs)
        if r > 0:
            self.lora_A = nn.Parameter(torch.empty((r, in_features)))
            self.lora_B = nn.Parameter(torch.empty((out_features, r)))
            self.scaling = self.lora_alpha / self.r
            self.reset_parameters()

    def reset_parameters(self) -> None:
        if hasattr(self, "lora_A"):
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
            nn.init.zeros_(self.lora_B)

    def get_lora_AB(self) -> torch.Tensor:
        return (self.lora_B @ self.lora_A) * self.scaling

    def merge(self) -> None:
        if torch.is_grad_enabled() and self.lora_A.requires_grad:
            raise RuntimeError("merge() writes into .data and has no backward; call it under torch.no_grad()")
        if self.r > 0 and not self.merged:
            lora_data = self.get_lora_AB()
            self.linear.weight.data += lora_data.to(device=self.linear.weight.data.device)
            self.merged = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pretrained = self.linear(x)
        if self.r == 0 or self.merged:
            return pretrained
        dropout_fn, scaling = (self.lora_dropout, self.scaling) if torch.is_grad_enabled() else (nn.Identity(), self.scaling)
        lora = (dropout_fn(x) @ self.lora_A.transpose(0, 1) @ self.lora_B.transpose(0, 1)) * scaling
        return pretrained + lora
