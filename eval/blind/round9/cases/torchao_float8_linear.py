from typing import NamedTuple, Optional

import torch

from torchao.float8.config import Float8LinearConfig, ScalingType
from torchao.float8.float8_scaling_utils import hp_tensor_to_float8_dynamic
from torchao.float8.float8_training_tensor import GemmInputRole, LinearMMConfig


class GemmPolicy(NamedTuple):
    backward_expected: bool
    emulate: bool
    pad_inner_dim: bool


def addmm_float8_unwrapped(a_data, a_scale, b_data, b_scale, output_dtype,
                           output_scale=None, bias=None, policy: Optional[GemmPolicy] = None):
    a_inverse_scale = a_scale.reciprocal()
    b_inverse_scale = b_scale.reciprocal()
    post_bias = None
    if output_dtype == torch.float32:
        post_bias = bias
        bias = None
    if policy is not None and policy.emulate:
        output = torch.mm(a_data.to(output_dtype) * a_inverse_scale, b_data.to(output_dtype) * b_inverse_scale)
    else:
        output = torch._scaled_mm(
            a_data,
            b_data,
            scale_a=a_inverse_scale,
            scale_b=b_inverse_scale,
            bias=bias,
            scale_result=output_scale,
            out_dtype=output_dtype,
            use_fast_accum=not policy.backward_expected,
        )
    if post_bias is not None:
        output += post_bias
    return output


class matmul_with_hp_or_float8_args(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_hp, weight_hp_t, linear_mm_config: LinearMMConfig,
                config: Float8LinearConfig, policy: GemmPolicy):
        ctx.save_for_backward(input_hp, weight_hp_t)
        ctx.linear_mm_config = linear_mm_config
        ctx.config = config
        orig_shape = input_hp.shape
        input_hp_reshaped = input_hp.reshape(-1, orig_shape[-1])
        input_fp8 = hp_tensor_to_float8_dynamic(
            input_hp_reshaped, config.cast_config_input.target_dtype,
            linear_mm_config, gemm_input_role=GemmInputRole.INPUT,
        )
        weight_fp8_t = hp_tensor_to_float8_dynamic(
            weight_hp_t, config.cast_config_weight.target_dtype,
            linear_mm_config, gemm_input_role=GemmInputRole.WEIGHT,
        )
        res_bits = addmm_float8_unwrapped(
            input_fp8._data, input_fp8._scale, weight_fp8_t._data, weight_fp8_t._scale,
            output_dtype=input_hp.dtype, policy=policy,
        )
        return res_bits.reshape(*orig_shape[:-1], res_bits.shape[-1])


class Float8Linear(torch.nn.Linear):
    def __init__(self, *args, **kwargs):
        config = kwargs.pop("config")
        super().__init__(*args, **kwargs)
        self.config = config
        self.scaling_type_input = config.cast_config_input.scaling_type
        self.linear_mm_config = LinearMMConfig()

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if torch.is_autocast_enabled():
            autocast_dtype = torch.get_autocast_gpu_dtype()
            input = input.to(autocast_dtype)
        assert self.scaling_type_input is ScalingType.DYNAMIC
        policy = GemmPolicy(torch.is_grad_enabled(), self.config.emulate, self.config.pad_inner_dim)
        output = matmul_with_hp_or_float8_args.apply(
            input, self.weight.t(), self.linear_mm_config, self.config, policy,
        )
        if self.bias is not None:
            output = output + self.bias.to(output.dtype)
        return output

    @classmethod
    def from_float(cls, mod, config: Optional[Float8LinearConfig] = None):
        config = config or Float8LinearConfig()
        with torch.device("meta"):
            new_mod = cls(mod.in_features, mod.out_features, bias=False, config=config)
        new_mod.weight = mod.weight
        new_mod.bias = mod.bias
        return new_mod
