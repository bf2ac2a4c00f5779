# adapted from huggingface/peft src/peft/tuners/lora/dora.py
import torch
from torch import nn

from peft.utils.integrations import dequantize_module_weight
from peft.utils.other import transpose


F = nn.functional


class DoraLinearLayer(nn.Module):
    def __init__(self, fan_in_fan_out):
        super().__init__()
        self.fan_in_fan_out = fan_in_fan_out
        self._kwargs = None

    def get_weight_norm(self, weight, lora_weight, scaling) -> torch.Tensor:
        weight = transpose(weight, self.fan_in_fan_out)
        weight = weight + scaling * lora_weight
        weight_norm = torch.linalg.norm(weight, dim=1).to(weight.dtype)
        return weight_norm

    def forward(self, x, *, lora_A, lora_B, scaling, base_layer):
        if self._kwargs:
            self._update_layer(**self._kwargs)
            self._kwargs = None

        lora_result = lora_B(lora_A(x))
        grad_mode = getattr(self, "_force_grad_mode", torch.is_grad_enabled())
        if grad_mode:
            # Don't use `lora_weight = lora_B.weight @ lora_A.weight` because this causes errors with FSDP.
            x_eye = torch.eye(lora_A.weight.shape[1], device=lora_A.weight.device, dtype=x.dtype)
            lora_weight = lora_B(lora_A(x_eye)).T
        else:
            lora_weight = (lora_B.weight @ lora_A.weight).to(x.dtype)

        magnitude = self.weight
        weight = dequantize_module_weight(base_layer)
        weight = weight.to(x.dtype)
        weight_norm = self.get_weight_norm(weight, lora_weight.detach(), scaling)
        # see section 4.3 of DoRA: treat ||V + dV||_c as a constant for the gradient
        if torch.is_grad_enabled():
            weight_norm = weight_norm.detach()
        mag_norm_scale = (magnitude / weight_norm).view(1, -1)
        result_dora = (mag_norm_scale - 1) * (
            F.linear(x, transpose(weight, self.fan_in_fan_out))
        ) + mag_norm_scale * lora_result * scaling
        return result_dora
