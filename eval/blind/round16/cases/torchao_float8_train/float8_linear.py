# adapted from pytorch/ao torchao/float8/float8_linear.py
"""
A simple module swap UX for a float8 version of `torch.nn.Linear`.
"""

from typing import Optional

import torch
import torch.utils.checkpoint as checkpoint

from torchao.float8.config import Float8LinearConfig, ScalingType
from torchao.float8.float8_scaling_utils import (
    NoopFwToFloat8E5M2BwDynamic,
    _maybe_initialize_amaxes_scales_for_float8_cast,
    hp_tensor_to_float8_delayed,
    hp_tensor_to_float8_dynamic,
)
from torchao.float8.float8_tensor import Float8Tensor, hp_tensor_and_scale_to_float8
from torchao.float8.float8_utils import e4m3_dtype, tensor_to_scale

from .float8_tensor import GemmInputRole, LinearMMConfig, ScaledMMConfig, linear_mm_config_for_step
from .fsdp_utils import WeightWithDynamicFloat8CastTensor, float8_all_gather_mode


@torch._dynamo.allow_in_graph
class manual_float8_matmul_with_args_in_float8(torch.autograd.Function):
    """Like torch.matmul, but with the arguments in float8"""

    @staticmethod
    def forward(ctx, input_fp8, weight_fp8_t):
        ctx.save_for_backward(input_fp8, weight_fp8_t)
        orig_shape = input_fp8.shape
        input_fp8_reshaped = input_fp8.reshape(-1, orig_shape[-1])
        res_bits = torch.mm(input_fp8_reshaped, weight_fp8_t)
        return res_bits.reshape(*orig_shape[:-1], res_bits.shape[-1])

    @staticmethod
    def backward(ctx, grad_output_fp8):
        input_fp8, weight_fp8_t = ctx.saved_tensors
        go_shape = grad_output_fp8.shape
        grad_output_fp8_reshaped = grad_output_fp8.reshape(-1, go_shape[-1])
        grad_input = torch.mm(grad_output_fp8_reshaped, weight_fp8_t.t())
        grad_input = grad_input.reshape(*go_shape[:-1], grad_input.shape[-1])
        input_fp8_reshaped = input_fp8.reshape(-1, input_fp8.shape[-1])
        grad_weight = torch.mm(grad_output_fp8_reshaped.t(), input_fp8_reshaped)
        return grad_input, grad_weight.t()


def _fp8_all_gather_pre_hook(module, args):
    # registered with prepend=True so it runs before FSDP unshards the weight
    module._fp8_ag_ctx = float8_all_gather_mode(torch.is_grad_enabled())
    module._fp8_ag_ctx.__enter__()


def _fp8_all_gather_post_hook(module, args, output):
    module._fp8_ag_ctx.__exit__(None, None, None)
    return output


class Float8Linear(torch.nn.Linear):
    """A wrapper around a `torch.nn.Linear` module which does fp8 compute."""

    def __init__(self, *args, **kwargs):
        config = kwargs.pop("config")
        emulate = config.emulate
        super().__init__(*args, **kwargs)
        self.scaling_type_input = config.cast_config_input.scaling_type
        self.scaling_type_weight = config.cast_config_weight.scaling_type
        self.has_any_delayed_scaling = self.scaling_type_input is ScalingType.DELAYED
        self.config = config
        self.linear_mm_config = LinearMMConfig(
            # output
            ScaledMMConfig(emulate, self.config.gemm_config_output.use_fast_accum, False, self.config.pad_inner_dim),
            # grad_input
            ScaledMMConfig(emulate, self.config.gemm_config_grad_input.use_fast_accum, False, self.config.pad_inner_dim),
            # grad_weight
            ScaledMMConfig(emulate, self.config.gemm_config_grad_weight.use_fast_accum, False, self.config.pad_inner_dim),
        )
        self.is_amax_initialized = not self.config.enable_amax_init
        self.amax_and_scale_synced = not self.config.enable_amax_init
        self.last_seen_input_dtype = None
        self.enable_pre_and_post_forward = self.config.enable_pre_and_post_forward

    def cast_input_to_float8(self, input: torch.Tensor, is_amax_initialized: bool,
                             mm_config: LinearMMConfig) -> torch.Tensor:
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
            return hp_tensor_to_float8_delayed(
                input, self.fp8_scale_input, e4m3_dtype, self.fp8_amax_input,
                linear_mm_config=mm_config, gemm_input_role=GemmInputRole.INPUT,
            )
        return hp_tensor_to_float8_dynamic(input, e4m3_dtype, mm_config, gemm_input_role=GemmInputRole.INPUT)

    def get_weight_scale(self, weight: torch.Tensor) -> Optional[torch.Tensor]:
        if isinstance(weight, Float8Tensor):
            return None
        return tensor_to_scale(weight, e4m3_dtype)

    def cast_weight_to_float8_t(self, weight, is_amax_initialized, weight_scale, mm_config):
        if isinstance(weight, Float8Tensor):
            return weight.t()
        weight_fp8 = hp_tensor_and_scale_to_float8(weight, weight_scale, e4m3_dtype, mm_config,
                                                   gemm_input_role=GemmInputRole.WEIGHT)
        return weight_fp8.t()

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

    def float8_post_forward(self):
        if not self.enable_pre_and_post_forward:
            return
        self.is_amax_initialized = True
        self.amax_and_scale_synced = False

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if self.has_any_delayed_scaling:
            self.float8_pre_forward(input)
        mm_config = linear_mm_config_for_step(self.linear_mm_config, torch.is_grad_enabled())

        input_fp8 = self.cast_input_to_float8(input, self.is_amax_initialized, mm_config)
        weight_scale = self.get_weight_scale(self.weight)
        # only recompute the fp8 weight in backward when there will be a backward
        if self.config.force_recompute_fp8_weight_in_bwd and torch.is_grad_enabled():
            weight_fp8_t = checkpoint.checkpoint(
                self.cast_weight_to_float8_t, self.weight, self.is_amax_initialized, weight_scale, mm_config,
                use_reentrant=False,
            )
        else:
            weight_fp8_t = self.cast_weight_to_float8_t(self.weight, self.is_amax_initialized, weight_scale, mm_config)

        output = manual_float8_matmul_with_args_in_float8.apply(input_fp8, weight_fp8_t)
        # Cast grad_output to float8_e5m2 during backward
        output = NoopFwToFloat8E5M2BwDynamic.apply(output, mm_config)

        if self.bias is not None:
            output = output + self.bias.to(output.dtype)
        if self.has_any_delayed_scaling:
            self.float8_post_forward()
        return output

    @classmethod
    def from_float(cls, mod, config: Optional[Float8LinearConfig] = None):
        if config is None:
            config = Float8LinearConfig()
        with torch.device("meta"):
            new_mod = cls(mod.in_features, mod.out_features, bias=False, config=config)
        new_mod.weight = mod.weight
        new_mod.bias = mod.bias
        if config.enable_fsdp_float8_all_gather:
            new_mod.weight = torch.nn.Parameter(
                WeightWithDynamicFloat8CastTensor(new_mod.weight, new_mod.linear_mm_config)
            )
            new_mod.register_forward_pre_hook(_fp8_all_gather_pre_hook, prepend=True)
            new_mod.register_forward_hook(_fp8_all_gather_post_hook)
        return new_mod
