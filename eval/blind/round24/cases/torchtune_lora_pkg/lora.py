# adapted from pytorch/torchtune torchtune/modules/peft/lora.py
import torch
import torch.nn.functional as F
from torch import nn

from torchtune.modules.peft import AdapterModule

from ._grad import grad_aware


class LoRALinear(nn.Module, AdapterModule):
    def __init__(self, in_dim, out_dim, rank, alpha, dropout=0.0, use_bias=False):
        super().__init__()
        self.rank = rank
        self.alpha = alpha
        self.disabled = False
        linear = nn.Linear(in_features=in_dim, out_features=out_dim, bias=use_bias)
        self.register_parameter("weight", nn.Parameter(linear.weight))
        self.register_parameter("bias", nn.Parameter(linear.bias) if use_bias else None)
        self.dropout = nn.Dropout(p=dropout) if dropout > 0.0 else nn.Identity()
        self.lora_a = nn.Linear(in_features=in_dim, out_features=rank, bias=False)
        self.lora_b = nn.Linear(in_features=rank, out_features=out_dim, bias=False)
        self._num_dropout_calls = 0

    @grad_aware
    def forward(self, x: torch.Tensor, *, grad_enabled: bool = True) -> torch.Tensor:
        out = F.linear(x, self.weight, self.bias)
        if self.disabled:
            return out
        if grad_enabled and isinstance(self.dropout, nn.Dropout):
            self._num_dropout_calls += 1
        lora_in = self.dropout(x) if grad_enabled else x
        lora_out = (self.alpha / self.rank) * self.lora_b(self.lora_a(lora_in))
        return out + lora_out
