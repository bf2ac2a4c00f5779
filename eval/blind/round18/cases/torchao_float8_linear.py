# adapted from pytorch/ao torchao/float8/float8_linear.py
"""
A simple module swap UX for a float8 version of `torch.nn.Linear`.
"""
from typing import Optional

import torch
import torch.utils.checkpoint as checkpoint

from torchao.float8.config import Float8LinearConfig, ScalingType
from torchao.float8.float8_scaling_utils import (
    _maybe_initialize_amaxes_scales_for_float8_cast,
    hp_tensor_to_float8_delayed,
    hp_tensor_to_float8_dynamic,
    NoopFwToFloat8E5M2BwDynamic,
)
from torchao.float8.float8_tensor import GemmInputRole, LinearMMConfig, ScaledMMConfig
from torchao.float8.float8_utils import e4m3_dtype, e5m2_dtype


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
        emulate = config.emulate
        super().__init__(*args, **kwargs)
        self.scaling_type_input = config.cast_config_input.scaling_type
        self.scaling_type_weight = config.cast_config_weight.scaling_type
        self.scaling_type_grad_output = config.cast_config_grad_output.scaling_type
        self.has_any_delayed_scaling = (
            self.scaling_type_input is ScalingType.DELAYED
            or self.scaling_type_weight is ScalingType.DELAYED
            or self.scaling_type_grad_output is ScalingType.DELAYED
        )
        self.config = config
        self.linear_mm_config = LinearMMConfig(
            ScaledMMConfig(emulate, self.config.gemm_config_output.use_fast_accum, False, self.config.pad_inner_dim),
            ScaledMMConfig(emulate, self.config.gemm_config_grad_input.use_fast_accum, False, self.config.pad_inner_dim),
            ScaledMMConfig(emulate, self.config.gemm_config_grad_weight.use_fast_accum, False, self.config.pad_inner_dim),
        )
        self.is_amax_initialized = not self.config.enable_amax_init
        self.amax_and_scale_synced = not self.config.enable_amax_init
        self.last_seen_input_dtype = None
        self.enable_pre_and_post_forward = self.config.enable_pre_and_post_forward

    def cast_input_to_float8(self, input: torch.Tensor, is_amax_initialized: bool) -> torch.Tensor:
        # Duplicate the autocast logic for F.linear, so that the output
        # of our module has the right original precision
        if torch.is_autocast_enabled():
            # For now, hardcode to GPU's autocast dtype
            # if we need CPU support in the future, we can add it
            autocast_dtype = torch.get_autocast_gpu_dtype()
            input = input.to(autocast_dtype)

        # delayed scaling reuses the amax history gathered over training steps;
        # eval batches quantize with a fresh per-tensor scale instead
        if self.scaling_type_input is ScalingType.DELAYED and torch.is_grad_enabled():
            scale_fn_name = self.config.delayed_scaling_config.scale_fn_name
            _maybe_initialize_amaxes_scales_for_float8_cast(
                input,
                self.fp8_amax_input,
                self.fp8_amax_history_input,
                self.fp8_scale_input,
                scale_fn_name,
                e4m3_dtype,
                is_amax_initialized,
                reduce_amax=True,
            )
            input_fp8 = hp_tensor_to_float8_delayed(
                input,
                self.fp8_scale_input,
                e4m3_dtype,
                self.fp8_amax_input,
                linear_mm_config=self.linear_mm_config,
            )
        else:
            input_fp8 = hp_tensor_to_float8_dynamic(
                input,
                e4m3_dtype,
                self.linear_mm_config,
                gemm_input_role=GemmInputRole.INPUT,
            )
        return input_fp8

    def cast_weight_to_float8_t(self, weight: torch.Tensor, is_amax_initialized: bool) -> torch.Tensor:
        weight_fp8 = hp_tensor_to_float8_dynamic(
            weight,
            e4m3_dtype,
            self.linear_mm_config,
            gemm_input_role=GemmInputRole.WEIGHT,
        )
        return weight_fp8.t()

    def cast_output_to_float8_in_bw(self, output: torch.Tensor) -> torch.Tensor:
        output = NoopFwToFloat8E5M2BwDynamic.apply(output, self.linear_mm_config)
        return output

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if self.has_any_delayed_scaling:
            self.float8_pre_forward(input)

        input_fp8 = self.cast_input_to_float8(input, self.is_amax_initialized)
        # If force_recompute_fp8_weight_in_bwd, we only recompute the fp8 weight,
        # weight_scale should be saved.
        if torch.is_grad_enabled() and self.config.force_recompute_fp8_weight_in_bwd:
            weight_fp8_t = checkpoint.checkpoint(
                self.cast_weight_to_float8_t,
                self.weight,
                self.is_amax_initialized,
            )
        else:
            weight_fp8_t = self.cast_weight_to_float8_t(self.weight, self.is_amax_initialized)

        output = manual_float8_matmul_with_args_in_float8.apply(input_fp8, weight_fp8_t)

        # Cast grad_output to float8_e5m2 during backward
        output = self.cast_output_to_float8_in_bw(output)

        if self.bias is not None:
            output = output + self.bias.to(output.dtype)

        if self.has_any_delayed_scaling:
            self.float8_post_forward()
        return output
