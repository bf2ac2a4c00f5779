# adapted from pytorch/ao torchao/float8/float8_linear.py
"""
A simple module swap UX for a float8 version of `torch.nn.Linear`.
"""

from typing import Optional

import torch
import torch.utils.checkpoint as checkpoint

from torchao.float8.config import Float8LinearConfig, ScalingGranularity, ScalingType
from torchao.float8.float8_scaling_utils import (
    NoopFwToFloat8E5M2BwDelayed,
    NoopFwToFloat8E5M2BwDynamic,
    _maybe_initialize_amaxes_scales_for_float8_cast,
    hp_tensor_to_float8_delayed,
    hp_tensor_to_float8_dynamic,
)
from torchao.float8.float8_tensor import (
    Float8Tensor,
    GemmInputRole,
    LinearMMConfig,
    ScaledMMConfig,
    hp_tensor_and_scale_to_float8,
)
from torchao.float8.float8_utils import e4m3_dtype, tensor_to_amax, tensor_to_scale


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

    @staticmethod
    def backward(ctx, grad_output_fp8):
        input_fp8, weight_fp8_t = ctx.saved_tensors
        grad_output_fp8_orig_shape = grad_output_fp8.shape
        grad_output_fp8_reshaped = grad_output_fp8.reshape(-1, grad_output_fp8_orig_shape[-1])
        grad_input = torch.mm(grad_output_fp8_reshaped, weight_fp8_t.t())
        grad_input = grad_input.reshape(*grad_output_fp8_orig_shape[:-1], grad_input.shape[-1])
        input_fp8_orig_shape = input_fp8.shape
        input_fp8_reshaped = input_fp8.reshape(-1, input_fp8_orig_shape[-1])
        grad_weight = torch.mm(grad_output_fp8_reshaped.t(), input_fp8_reshaped)
        return grad_input, grad_weight.t()


class Float8Linear(torch.nn.Linear):
    """
    A wrapper around a `torch.nn.Linear` module which does fp8 compute, and tracks
    scales in way friendly to delayed scaling.
    """

    def __init__(self, *args, **kwargs):
        self.always_float32_buffers = set()
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
        self.create_buffers()
        self.linear_mm_config = LinearMMConfig(
            ScaledMMConfig(emulate, self.config.gemm_config_output.use_fast_accum, False, self.config.pad_inner_dim),
            ScaledMMConfig(emulate, self.config.gemm_config_grad_input.use_fast_accum, False, self.config.pad_inner_dim),
            ScaledMMConfig(emulate, self.config.gemm_config_grad_weight.use_fast_accum, False, self.config.pad_inner_dim),
        )
        self.is_amax_initialized = not self.config.enable_amax_init
        self.amax_and_scale_synced = not self.config.enable_amax_init
        self.last_seen_input_dtype = None
        self.enable_pre_and_post_forward = self.config.enable_pre_and_post_forward

    def create_buffers(self):
        history_len = self.config.delayed_scaling_config.history_len
        device = self.weight.device
        default_input = torch.finfo(torch.float8_e4m3fn).max
        default_weight = torch.finfo(torch.float8_e4m3fn).max
        default_grad_output = torch.finfo(torch.float8_e5m2).max
        if self.has_any_delayed_scaling:
            self.register_always_float32_buffer("fp8_amax_input", torch.tensor([default_input], device=device))
            self.register_always_float32_buffer("fp8_amax_history_input", torch.zeros(history_len, device=device))
            self.register_always_float32_buffer("fp8_scale_input", torch.tensor([1.0], device=device))
            self.register_always_float32_buffer("fp8_amax_weight", torch.tensor([default_weight], device=device))
            self.register_always_float32_buffer("fp8_amax_history_weight", torch.zeros(history_len, device=device))
            self.register_always_float32_buffer("fp8_scale_weight", torch.tensor([1.0], device=device))
            self.register_always_float32_buffer(
                "fp8_amax_grad_output", torch.tensor([default_grad_output], device=device)
            )
            self.register_always_float32_buffer(
                "fp8_amax_history_grad_output", torch.zeros(history_len, device=device)
            )
            self.register_always_float32_buffer("fp8_scale_grad_output", torch.tensor([1.0], device=device))

    def register_always_float32_buffer(self, name: str, tensor: Optional[torch.Tensor], persistent: bool = True):
        self.register_buffer(name=name, tensor=tensor, persistent=persistent)
        self.always_float32_buffers.add(name)

    def cast_input_to_float8(self, input: torch.Tensor, is_amax_initialized: bool) -> torch.Tensor:
        # Duplicate the autocast logic for F.linear, so that the output
        # of our module has the right original precision
        if torch.is_autocast_enabled():
            autocast_dtype = torch.get_autocast_gpu_dtype()
            input = input.to(autocast_dtype)

        if self.scaling_type_input is ScalingType.DELAYED:
            scale_fn_name = self.config.delayed_scaling_config.scale_fn_name
            _maybe_initialize_amaxes_scales_for_float8_cast(
                input,
                self.fp8_amax_input,
                self.fp8_amax_history_input,
                self.fp8_scale_input,
                scale_fn_name,
                e4m3_dtype,
                is_amax_initialized,
                reduce_amax=torch.is_grad_enabled(),
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
            assert self.scaling_type_input is ScalingType.DYNAMIC
            input_fp8 = hp_tensor_to_float8_dynamic(
                input, e4m3_dtype, self.linear_mm_config, gemm_input_role=GemmInputRole.INPUT
            )
        return input_fp8

    def get_weight_scale(self, weight: torch.Tensor) -> Optional[torch.Tensor]:
        if isinstance(weight, Float8Tensor):
            return None
        if self.scaling_type_weight is ScalingType.DELAYED:
            scale_fn_name = self.config.delayed_scaling_config.scale_fn_name
            _maybe_initialize_amaxes_scales_for_float8_cast(
                weight,
                self.fp8_amax_weight,
                self.fp8_amax_history_weight,
                self.fp8_scale_weight,
                scale_fn_name,
                e4m3_dtype,
                self.is_amax_initialized,
                reduce_amax=True,
            )
            self.fp8_amax_weight.fill_(tensor_to_amax(weight))
            return self.fp8_scale_weight
        return tensor_to_scale(weight, e4m3_dtype)

    def cast_weight_to_float8_t(self, weight, is_amax_initialized, weight_scale=None):
        if isinstance(weight, Float8Tensor):
            return weight.t()
        weight_fp8 = hp_tensor_and_scale_to_float8(
            weight, weight_scale, e4m3_dtype, self.linear_mm_config, gemm_input_role=GemmInputRole.WEIGHT
        )
        return weight_fp8.t()

    def cast_output_to_float8_in_bw(self, output: torch.Tensor) -> torch.Tensor:
        if self.scaling_type_grad_output is ScalingType.DELAYED:
            scale_fn_name = self.config.delayed_scaling_config.scale_fn_name
            output = NoopFwToFloat8E5M2BwDelayed.apply(
                output,
                self.fp8_amax_grad_output,
                self.fp8_amax_history_grad_output,
                self.fp8_scale_grad_output,
                scale_fn_name,
                self.is_amax_initialized,
                self.linear_mm_config,
            )
        else:
            output = NoopFwToFloat8E5M2BwDynamic.apply(output, self.linear_mm_config)
        return output

    def float8_post_forward(self):
        if not self.enable_pre_and_post_forward:
            return
        self.is_amax_initialized = True
        self.amax_and_scale_synced = False

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if self.has_any_delayed_scaling:
            self.last_seen_input_dtype = input.dtype

        input_fp8 = self.cast_input_to_float8(input, self.is_amax_initialized)
        weight_scale = self.get_weight_scale(self.weight)

        if self.config.force_recompute_fp8_weight_in_bwd and torch.is_grad_enabled():
            weight_fp8_t = checkpoint.checkpoint(
                self.cast_weight_to_float8_t,
                self.weight,
                self.is_amax_initialized,
                weight_scale,
                use_reentrant=False,
            )
        else:
            weight_fp8_t = self.cast_weight_to_float8_t(self.weight, self.is_amax_initialized, weight_scale)

        output = manual_float8_matmul_with_args_in_float8.apply(input_fp8, weight_fp8_t)
        output = self.cast_output_to_float8_in_bw(output)

        if self.bias is not None:
            output = output + self.bias.to(output.dtype)

        if self.has_any_delayed_scaling:
            self.float8_post_forward()
        return output
