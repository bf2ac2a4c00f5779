"""Linear layer running its matmuls in float8 with dynamic tensorwise scaling."""
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from torchao.float8.config import Float8LinearConfig, ScalingType
from torchao.float8.float8_scaling_utils import hp_tensor_to_float8_dynamic
from torchao.float8.float8_training_tensor import GemmInputRole, LinearMMConfig


def _cast_weight_to_float8(weight, float8_dtype, linear_mm_config):
    return hp_tensor_to_float8_dynamic(
        weight, float8_dtype, linear_mm_config, gemm_input_role=GemmInputRole.WEIGHT
    )


class Float8Linear(torch.nn.Linear):
    def __init__(self, *args, **kwargs):
        config = kwargs.pop("config")
        super().__init__(*args, **kwargs)
        self.config: Float8LinearConfig = config
        self.scaling_type_input = config.cast_config_input.scaling_type
        self.scaling_type_weight = config.cast_config_weight.scaling_type
        self.linear_mm_config = LinearMMConfig(
            config.gemm_config_output, config.gemm_config_grad_input, config.gemm_config_grad_weight
        )

    def cast_input_to_float8(self, input: torch.Tensor) -> torch.Tensor:
        if torch.is_autocast_enabled():
            input = input.to(torch.get_autocast_gpu_dtype())
        return hp_tensor_to_float8_dynamic(
            input, self.config.cast_config_input.target_dtype, self.linear_mm_config,
            gemm_input_role=GemmInputRole.INPUT,
        )

    def cast_weight_to_float8(self, weight: torch.Tensor) -> torch.Tensor:
        dtype = self.config.cast_config_weight.target_dtype
        if self.config.force_recompute_fp8_weight_in_bwd and torch.is_grad_enabled():
            return checkpoint(_cast_weight_to_float8, weight, dtype, self.linear_mm_config, use_reentrant=False)
        return _cast_weight_to_float8(weight, dtype, self.linear_mm_config)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        dynamic = self.scaling_type_input is ScalingType.DYNAMIC and self.scaling_type_weight is ScalingType.DYNAMIC
        run_fp8 = dynamic and torch.is_grad_enabled()
        if not run_fp8:
            return F.linear(input, self.weight, self.bias)
        input_fp8 = self.cast_input_to_float8(input)
        weight_fp8_t = self.cast_weight_to_float8(self.weight).t()
        output = torch.mm(input_fp8.reshape(-1, input_fp8.shape[-1]), weight_fp8_t)
        output = output.reshape(*input.shape[:-1], output.shape[-1])
        if self.bias is not None:
            output = output + self.bias.to(output.dtype)
        return output

    @classmethod
    def from_float(cls, mod, config=None):
        config = config or Float8LinearConfig()
        with torch.device("meta"):
            new_mod = cls(mod.in_features, mod.out_features, bias=False, config=config)
        new_mod.weight = mod.weight
        new_mod.bias = mod.bias
        return new_mod
