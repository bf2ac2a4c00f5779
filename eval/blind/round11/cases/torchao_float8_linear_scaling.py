# Adapted from pytorch/ao torchao/float8/float8_linear.py
# (Float8Linear.float8_pre_forward and cast_input_to_float8 delayed/dynamic scaling branches).
import torch

from torchao.float8.config import ScalingType
from torchao.float8.float8_scaling_utils import (
    _maybe_initialize_amaxes_scales_for_float8_cast,
    hp_tensor_to_float8_delayed,
    hp_tensor_to_float8_dynamic,
)
from torchao.float8.float8_tensor import GemmInputRole, LinearMMConfig


class Float8Linear(torch.nn.Linear):
    def float8_pre_forward(self, input):
        if not self.enable_pre_and_post_forward:
            return
        if (
            self.is_amax_initialized
            and (not self.amax_and_scale_synced)
            and torch.is_grad_enabled()
        ):
            raise AssertionError(
                "amaxes and scales not synced, please call `sync_float8_amax_and_scale_history` before forward"
            )
        self.last_seen_input_dtype = input.dtype

    def cast_input_to_float8(self, input: torch.Tensor) -> torch.Tensor:
        if torch.is_autocast_enabled():
            autocast_dtype = torch.get_autocast_gpu_dtype()
            input = input.to(autocast_dtype)

        if torch.is_grad_enabled() and self.scaling_type_input is ScalingType.DELAYED:
            scale_fn_name = self.config.delayed_scaling_config.scale_fn_name
            _maybe_initialize_amaxes_scales_for_float8_cast(
                input, self.fp8_amax_input, self.fp8_amax_history_input, self.fp8_scale_input,
                scale_fn_name, torch.float8_e4m3fn, self.is_amax_initialized, reduce_amax=True,
            )
            input_fp8 = hp_tensor_to_float8_delayed(
                input, self.fp8_scale_input, torch.float8_e4m3fn, self.fp8_amax_input,
                linear_mm_config=self.linear_mm_config, gemm_input_role=GemmInputRole.INPUT,
            )
        else:
            input_fp8 = hp_tensor_to_float8_dynamic(
                input, torch.float8_e4m3fn, self.linear_mm_config, gemm_input_role=GemmInputRole.INPUT,
            )
        return input_fp8

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        self.float8_pre_forward(input)
        input_fp8 = self.cast_input_to_float8(input)
        weight_fp8 = self.cast_weight_to_float8(self.weight)
        output = torch.mm(input_fp8.reshape(-1, input_fp8.shape[-1]), weight_fp8.t())
        output = output.reshape(*input.shape[:-1], output.shape[-1])
        if self.bias is not None:
            output = output + self.bias.to(output.dtype)
        self.float8_post_forward()
        return output
