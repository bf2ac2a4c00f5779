# adapted from pytorch/torchtune torchtune/modules/peft/lora.py
import torch
import torch.nn.functional as F
from torch import nn

from torchtune.modules.peft import AdapterModule


class LoRALinear(nn.Module, AdapterModule):
    def _merged_weight(self) -> torch.Tensor:
        return self.weight + (self.alpha / self.rank) * (self.lora_b.weight @ self.lora_a.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        match (self.disabled, torch.is_grad_enabled()):
            case (True, _):
                return F.linear(x, self.weight, self.bias)
            case (False, False):
                # inference only: fold the adapters into one matmul
                return F.linear(x, self._merged_weight(), self.bias)
            case _:
                out = F.linear(x, self.weight, self.bias)
                lora_out = self.lora_a(self.dropout(x))
                return out + (self.alpha / self.rank) * self.lora_b(lora_out)
