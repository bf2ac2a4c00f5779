# adapted from pytorch/ao torchao/float8/float8_linear.py
import torch

from torchao.float8.config import Float8LinearConfig, ScalingType, ScalingGranularity
from torchao.float8.float8_scaling_utils import (
    _maybe_initialize_amaxes_scales_for_float8_cast,
    hp_tensor_to_float8_delayed,
    hp_tensor_to_float8_dynamic,
)
from torchao.float8.float8_tensor import GemmInputRole, LinearMMConfig
from torchao.float8.float8_utils import e4m3_dtype


@torch._dynamo.allow_in_graph
class manual_float8_matmul_with_args_in_float8(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_fp8, weight_fp8_t):
        ctx.save_for_backward(input_fp8, weight_fp8_t)
        orig_shape = input_fp8.shape
        input_fp8_reshaped = input_fp8.reshape(-1, orig_shape[-1])
        res_bits = torch.mm(input_fp8_reshaped, weight_fp8_t)
        res_bits = res_bits.reshape(*orig_shape[:-1], res_bits.shape[-1])
        return res_bits


class Float8Linear(torch.nn.Linear):
    """
    A wrapper around a `torch.nn.Linear` module which does fp8 compute, and tracks
    scales in way friendly to delayed scaling.
    """

    def __init__(self, *args, **kwargs):
        config = kwargs.pop("config")
        super().__init__(*args, **kwargs)
        self.scaling_type_input = config.cast_config_input.scaling_type
        self.scaling_type_weight = config.cast_config_weight.scaling_type
        self.config = config
        self.linear_mm_config = LinearMMConfig()
        self.is_amax_initialized = not self.config.enable_amax_init
        self.last_seen_input_dtype = None

    def cast_input_to_float8(self, input: torch.Tensor) -> torch.Tensor:
        # Duplicate the autocast logic for F.linear, so that the output
        # of our module has the right original precision
        if torch.is_autocast_enabled():
            # For now, hardcode to GPU's autocast dtype
            # if we need CPU support in the future, we can add it
            autocast_dtype = torch.get_autocast_gpu_dtype()
            input = input.to(autocast_dtype)

        # delayed scaling history is only advanced while training
        scaling_type = self.scaling_type_input if torch.is_grad_enabled() else ScalingType.DYNAMIC
        if scaling_type is ScalingType.DELAYED:
            _maybe_initialize_amaxes_scales_for_float8_cast(
                input,
                self.fp8_amax_input,
                self.fp8_amax_history_input,
                self.fp8_scale_input,
                self.config.delayed_scaling_config.scale_fn_name,
                e4m3_dtype,
                self.is_amax_initialized,
                reduce_amax=True,
            )
            input_fp8 = hp_tensor_to_float8_delayed(
                input,
                self.fp8_scale_input,
                e4m3_dtype,
                self.fp8_amax_input,
                linear_mm_config=self.linear_mm_config,
                gemm_input_role=GemmInputRole.INPUT,
            )
        else:
            input_fp8 = hp_tensor_to_float8_dynamic(
                input,
                e4m3_dtype,
                self.linear_mm_config,
                gemm_input_role=GemmInputRole.INPUT,
            )
        return input_fp8

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        input_fp8 = self.cast_input_to_float8(input)
        weight_fp8_t = self.cast_weight_to_float8_t(self.weight)
        output = manual_float8_matmul_with_args_in_float8.apply(input_fp8, weight_fp8_t)
        if self.bias is not None:
            output = output + self.bias.to(output.dtype)
        return output
