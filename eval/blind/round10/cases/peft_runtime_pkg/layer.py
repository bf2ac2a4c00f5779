# Adapted from huggingface/peft src/peft/tuners/lora/layer.py (Linear.forward, _mixed_batch_forward)
import torch
import torch.nn as nn
import torch.nn.functional as F

from .runtime import current_runtime


class LoraLinear(nn.Module):
    def __init__(self, base: nn.Linear, r=8, alpha=16, dropout=0.1):
        super().__init__()
        self.base = base
        self.lora_A = nn.Linear(base.in_features, r, bias=False)
        self.lora_B = nn.Linear(r, base.out_features, bias=False)
        self.dropout_p = dropout
        self.scaling = alpha / r

    def forward(self, x):
        rt = current_runtime()
        result = self.base(x)
        p = self.dropout_p if rt.grad else 0.0
        h = F.dropout(x, p=p, training=True)
        if not rt.grad or not self.training:
            delta = F.linear(F.linear(h.float(), self.lora_A.weight.float()), self.lora_B.weight.float()).to(x.dtype)
        else:
            delta = self.lora_B(self.lora_A(h))
        if rt.grad and not self.lora_A.weight.requires_grad:
            self.lora_A.weight.requires_grad_(True)
        return result + delta * self.scaling
