from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn


def transpose(weight: torch.Tensor, fan_in_fan_out: bool) -> torch.Tensor:
    return weight.T if fan_in_fan_out else weight


class DoraLinearLayer(nn.Module):
    def __init__(self, fan_in_fan_out: bool):
        super().__init__()
        self.fan_in_fan_out = fan_in_fan_out

    def get_weight_norm(self, weight: torch.Tensor, lora_weight: torch.Tensor, scaling: float) -> torch.Tensor:
        weight = transpose(weight, self.fan_in_fan_out)
        weight = weight + scaling * lora_weight
        return torch.linalg.norm(weight, dim=1).to(weight.dtype)

    def update_layer(self, *, base_layer: nn.Module, lora_A: torch.Tensor, lora_B: torch.Tensor,
                     scaling: float) -> None:
        with torch.no_grad():
            lora_weight = lora_B @ lora_A
            weight_norm = self.get_weight_norm(base_layer.weight, lora_weight.to(base_layer.weight.dtype), scaling)
        self.weight = nn.Parameter(weight_norm, requires_grad=True)

    def forward(self, x: torch.Tensor, *, lora_A: nn.Module, lora_B: nn.Module, scaling: float,
                base_layer: nn.Module, base_result: Optional[torch.Tensor] = None) -> torch.Tensor:
        x_eye = torch.eye(lora_A.weight.shape[1], device=lora_A.weight.device, dtype=x.dtype)
        lora_weight = lora_B(lora_A(x_eye)).T
        magnitude = self.weight
        weight = base_layer.weight.to(x.dtype)
        weight_norm = self.get_weight_norm(weight, lora_weight.detach(), scaling)
        weight_norm = weight_norm.detach()
        mag_norm_scale = (magnitude / weight_norm).view(1, -1)
        lora_result = lora_B(lora_A(x))
        bias = None
        if base_result is not None:
            bias = base_layer.bias
            if bias is not None:
                base_result = base_result - bias
        else:
            base_result = F.linear(x, transpose(weight, self.fan_in_fan_out))
        result_dora = (mag_norm_scale - 1) * base_result + mag_norm_scale * lora_result * scaling
        return result_dora
