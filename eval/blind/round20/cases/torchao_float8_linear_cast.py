# adapted from pytorch/ao torchao/float8/float8_linear.py
import torch

from torchao.float8.config import Float8LinearConfig, ScalingType
from torchao.float8.float8_scaling_utils import get_maybe_axiswise_dim, hp_tensor_to_float8_dynamic
from torchao.float8.float8_tensor import GemmInputRole, LinearMMConfig, ScaledMMConfig
from torchao.float8.float8_utils import e4m3_dtype


@torch._dynamo.allow_in_graph
class manual_float8_matmul_with_args_in_hp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_hp, weight_hp_t, linear_mm_config: LinearMMConfig, config: Float8LinearConfig):
        ctx.save_for_backward(input_hp, weight_hp_t)
        ctx.linear_mm_config = linear_mm_config
        ctx.config = config
        c = config

        # fp8 only pays off when the same casts are reused by the backward
        use_fp8_input = torch.is_grad_enabled() and not c.cast_config_input.keep_in_original_precision
        if not use_fp8_input:
            input_maybe_fp8 = input_hp
        else:
            input_maybe_fp8 = hp_tensor_to_float8_dynamic(
                input_hp,
                e4m3_dtype,
                linear_mm_config,
                gemm_input_role=GemmInputRole.INPUT,
                scaling_granularity=c.cast_config_input.scaling_granularity,
                axiswise_dim=get_maybe_axiswise_dim(-1, c.cast_config_input.scaling_granularity),
            )

        if c.cast_config_weight.keep_in_original_precision:
            weight_maybe_fp8_t = weight_hp_t
        else:
            weight_maybe_fp8_t = hp_tensor_to_float8_dynamic(
                weight_hp_t,
                e4m3_dtype,
                linear_mm_config,
                gemm_input_role=GemmInputRole.WEIGHT,
                scaling_granularity=c.cast_config_weight.scaling_granularity,
                axiswise_dim=get_maybe_axiswise_dim(0, c.cast_config_weight.scaling_granularity),
            )

        orig_shape = input_maybe_fp8.shape
        input_maybe_fp8_reshaped = input_maybe_fp8.reshape(-1, orig_shape[-1])
        res_bits = torch.mm(input_maybe_fp8_reshaped, weight_maybe_fp8_t)
        res_bits = res_bits.reshape(*orig_shape[:-1], res_bits.shape[-1])
        return res_bits


class Float8Linear(torch.nn.Linear):
    def __init__(self, *args, **kwargs):
        config = kwargs.pop("config")
        emulate = config.emulate
        super().__init__(*args, **kwargs)
        self.scaling_type_input = config.cast_config_input.scaling_type
        self.config = config
        self.linear_mm_config = LinearMMConfig(
            ScaledMMConfig(emulate, self.config.gemm_config_output.use_fast_accum, False, self.config.pad_inner_dim),
            ScaledMMConfig(emulate, self.config.gemm_config_grad_input.use_fast_accum, False, self.config.pad_inner_dim),
            ScaledMMConfig(emulate, self.config.gemm_config_grad_weight.use_fast_accum, False, self.config.pad_inner_dim),
        )

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        # Duplicate the autocast logic for F.linear, so that the output
        # of our module has the right original precision
        if torch.is_autocast_enabled():
            autocast_dtype = torch.get_autocast_gpu_dtype()
            input = input.to(autocast_dtype)

        output = manual_float8_matmul_with_args_in_hp.apply(
            input,
            self.weight.t(),
            self.linear_mm_config,
            self.config,
        )
        if self.bias is not None:
            output = output + self.bias.to(output.dtype)
        return output
