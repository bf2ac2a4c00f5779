# adapted from pytorch/ao torchao/float8/float8_linear.py
import functools

import torch

from torchao.float8.config import Float8LinearConfig, ScalingType
from torchao.float8.float8_scaling_utils import (
    _maybe_initialize_amaxes_scales_for_float8_cast,
    hp_tensor_to_float8_delayed,
)
from torchao.float8.float8_tensor import LinearMMConfig, ScaledMMConfig
from torchao.float8.float8_utils import e4m3_dtype


def _only_when_grad_enabled(fn):
    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        if torch.is_grad_enabled():
            return fn(self, *args, **kwargs)
        return None
    return wrapper


class Float8Linear(torch.nn.Linear):
    def __init__(self, *args, **kwargs):
        self.always_float32_buffers = set()
        config = kwargs.pop("config")
        emulate = config.emulate
        super().__init__(*args, **kwargs)
        self.scaling_type_input = config.cast_config_input.scaling_type
        self.has_any_delayed_scaling = self.scaling_type_input is ScalingType.DELAYED
        self.config = config
        self.linear_mm_config = LinearMMConfig(
            ScaledMMConfig(emulate, self.config.gemm_config_output.use_fast_accum, False, self.config.pad_inner_dim),
            ScaledMMConfig(emulate, self.config.gemm_config_grad_input.use_fast_accum, False, self.config.pad_inner_dim),
            ScaledMMConfig(emulate, self.config.gemm_config_grad_weight.use_fast_accum, False, self.config.pad_inner_dim),
        )
        self.is_amax_initialized = not self.config.enable_amax_init
        self.last_seen_input_dtype = None

    @_only_when_grad_enabled
    def _update_input_amax_history(self, input):
        # the scale stored here is what the *next* forward uses to cast its input
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

    def cast_input_to_float8(self, input: torch.Tensor) -> torch.Tensor:
        if torch.is_autocast_enabled():
            autocast_dtype = torch.get_autocast_gpu_dtype()
            input = input.to(autocast_dtype)
        self._update_input_amax_history(input)
        return hp_tensor_to_float8_delayed(
            input,
            self.fp8_scale_input,
            e4m3_dtype,
            self.fp8_amax_input,
            linear_mm_config=self.linear_mm_config,
        )

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if self.has_any_delayed_scaling:
            self.last_seen_input_dtype = input.dtype
        input_fp8 = self.cast_input_to_float8(input)
        weight_fp8_t = self.cast_weight_to_float8_t(self.weight)
        output = manual_float8_matmul_with_args_in_float8.apply(input_fp8, weight_fp8_t)
        if self.bias is not None:
            output = output + self.bias.to(output.dtype)
        return output
