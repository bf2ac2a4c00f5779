# adapted from pytorch/ao torchao/float8/float8_linear.py
import torch

from torchao.float8.config import Float8LinearConfig, ScalingType
from torchao.float8.float8_scaling_utils import (
    hp_tensor_to_float8_delayed,
    hp_tensor_to_float8_dynamic,
)
from torchao.float8.float8_tensor import GemmInputRole, LinearMMConfig, ScaledMMConfig
from torchao.float8.float8_utils import e4m3_dtype


# delayed scaling needs amax history that is only refreshed by training steps
_INPUT_CAST_BY_GRAD_MODE = {
    True: hp_tensor_to_float8_delayed,
    False: hp_tensor_to_float8_dynamic,
}


class Float8Linear(torch.nn.Linear):
    def __init__(self, *args, **kwargs):
        config = kwargs.pop("config")
        emulate = config.emulate
        super().__init__(*args, **kwargs)
        self.config = config
        self.emulate = emulate
        self.scaling_type_input = config.cast_config_input.scaling_type

    def _linear_mm_config(self):
        return LinearMMConfig(
            ScaledMMConfig(
                self.emulate,
                self.config.gemm_config_output.use_fast_accum or not torch.is_grad_enabled(),
                False,
                self.config.pad_inner_dim,
            ),
            ScaledMMConfig(self.emulate, self.config.gemm_config_grad_input.use_fast_accum, False,
                           self.config.pad_inner_dim),
            ScaledMMConfig(self.emulate, self.config.gemm_config_grad_weight.use_fast_accum, False,
                           self.config.pad_inner_dim),
        )

    def cast_input_to_float8(self, input: torch.Tensor) -> torch.Tensor:
        linear_mm_config = self._linear_mm_config()
        if self.scaling_type_input is ScalingType.DELAYED:
            cast_fn = _INPUT_CAST_BY_GRAD_MODE[torch.is_grad_enabled()]
            return cast_fn(input, e4m3_dtype, linear_mm_config, gemm_input_role=GemmInputRole.INPUT)
        return hp_tensor_to_float8_dynamic(input, e4m3_dtype, linear_mm_config,
                                           gemm_input_role=GemmInputRole.INPUT)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        input_fp8 = self.cast_input_to_float8(input)
        weight_fp8_t = self.cast_weight_to_float8_t(self.weight)
        output = manual_float8_matmul_with_args_in_float8.apply(input_fp8, weight_fp8_t)
        if self.bias is not None:
            output = output + self.bias.to(output.dtype)
        return output
