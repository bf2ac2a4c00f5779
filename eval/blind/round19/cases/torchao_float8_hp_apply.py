# adapted from pytorch/ao torchao/float8/float8_linear.py
import torch

from torchao.float8.config import Float8LinearConfig
from torchao.float8.float8_scaling_utils import (
    hp_tensor_to_float8_dynamic,
    get_maybe_axiswise_dim,
)
from torchao.float8.float8_tensor import GemmInputRole, LinearMMConfig
from torchao.float8.float8_utils import e4m3_dtype


@torch._dynamo.allow_in_graph
class manual_float8_matmul_with_args_in_hp(torch.autograd.Function):
    """
    Like torch.matmul, but with the arguments in high precision and the cast to float8
    defined inside of this function.
    """

    @staticmethod
    def forward(
        ctx,
        input_hp: torch.Tensor,
        weight_hp_t: torch.Tensor,
        linear_mm_config: LinearMMConfig,
        config: Float8LinearConfig,
        will_backward: bool = True,
    ):
        if will_backward:
            ctx.save_for_backward(input_hp, weight_hp_t)
        ctx.linear_mm_config = linear_mm_config
        ctx.config = config

        c = config

        if c.cast_config_input.keep_in_original_precision or not will_backward:
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
    # __init__/create_buffers as upstream

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        output = manual_float8_matmul_with_args_in_hp.apply(
            input,
            self.weight.t(),
            self.linear_mm_config,
            self.config,
            torch.is_grad_enabled(),
        )
        if self.bias is not None:
            output = output + self.bias.to(output.dtype)
        return output
