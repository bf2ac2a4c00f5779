from typing import Optional

import torch

from .config import Float8LinearConfig, _backward_will_run, tensor_to_scale
from .fsdp_utils import Float8TrainingTensor, hp_tensor_and_scale_to_float8


class Float8Linear(torch.nn.Linear):
    def __init__(self, *args, config: Optional[Float8LinearConfig] = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.config = config or Float8LinearConfig()
        self._weight_fp8_t_cache: Optional[torch.Tensor] = None

    def cast_weight_to_float8(self, weight: torch.Tensor) -> Float8TrainingTensor:
        if isinstance(weight, Float8TrainingTensor):
            return weight
        scale = tensor_to_scale(weight, self.config.target_dtype)
        return hp_tensor_and_scale_to_float8(weight, scale, self.config.target_dtype)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        weight_fp8 = self.cast_weight_to_float8(self.weight)
        self._weight_fp8_t_cache = (
            weight_fp8._data.t().contiguous().t() if _backward_will_run() else None
        )
        input_scale = tensor_to_scale(input, self.config.target_dtype)
        input_fp8 = hp_tensor_and_scale_to_float8(input, input_scale, self.config.target_dtype)
        output = torch._scaled_mm(
            input_fp8._data.reshape(-1, input.shape[-1]),
            weight_fp8._data.t(),
            scale_a=input_fp8._scale.reciprocal(),
            scale_b=weight_fp8._scale.reciprocal(),
            out_dtype=input.dtype,
        )
        output = output.reshape(*input.shape[:-1], output.shape[-1])
        if self.bias is not None:
            output = output + self.bias.to(output.dtype)
        return output
