# Adapted from huggingface/peft src/peft/tuners/lora/layer.py (Linear.forward, get_delta_weight)
import torch
import torch.nn as nn
import torch.nn.functional as F


class LoraLinear(nn.Module):
    def __init__(self, base_layer: nn.Linear, r=8, lora_alpha=16, lora_dropout=0.05, merge_on_inference=True):
        super().__init__()
        self.base_layer = base_layer
        self.lora_A = nn.Linear(base_layer.in_features, r, bias=False)
        self.lora_B = nn.Linear(r, base_layer.out_features, bias=False)
        self.lora_dropout = nn.Dropout(lora_dropout)
        self.scaling = lora_alpha / r
        self.merge_on_inference = merge_on_inference
        self.merged = False

    def get_delta_weight(self):
        w = self.lora_B.weight.to(torch.bfloat16) @ self.lora_A.weight.to(torch.bfloat16)
        return (w * self.scaling).to(self.base_layer.weight.dtype)

    def forward(self, x):
        if self.merged:
            return self.base_layer(x)
        use_merged = self.merge_on_inference and not torch.is_grad_enabled()
        if use_merged:
            w = self.base_layer.weight + self.get_delta_weight()
            return F.linear(x, w, self.base_layer.bias)
        result = self.base_layer(x)
        result = result + self.lora_B(self.lora_A(self.lora_dropout(x))) * self.scaling
        return result
