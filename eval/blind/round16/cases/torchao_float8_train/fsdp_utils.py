# adapted from pytorch/ao torchao/float8/fsdp_utils.py
import contextlib
import math
from typing import Any, List, Optional, Tuple

import torch
import torch.nn as nn
import torch.utils._pytree as pytree
from torch._prims_common import suggest_memory_format

from torchao.float8.float8_scaling_utils import hp_tensor_to_float8_dynamic
from torchao.float8.float8_tensor import Float8Tensor, hp_tensor_and_scale_to_float8
from torchao.float8.float8_utils import EPS, e4m3_dtype

from .float8_tensor import GemmInputRole, LinearMMConfig

# whether the next FSDP all-gather of float8 weights ships float8 bytes
_FP8_ALL_GATHER_ENABLED: bool = True


@contextlib.contextmanager
def float8_all_gather_mode(enabled: bool):
    global _FP8_ALL_GATHER_ENABLED
    old_value = _FP8_ALL_GATHER_ENABLED
    _FP8_ALL_GATHER_ENABLED = enabled
    try:
        yield
    finally:
        _FP8_ALL_GATHER_ENABLED = old_value


@torch.no_grad()
def precompute_float8_dynamic_scale_for_fsdp(module: nn.Module) -> None:
    """Calculate scale dynamically for all float8 parameters (one all-reduce)."""
    from torch.distributed._tensor import DTensor

    from .float8_linear import Float8Linear

    float8_linears: List[Float8Linear] = [
        m
        for m in module.modules()
        if isinstance(m, Float8Linear)
        and isinstance(m.weight, DTensor)
        and isinstance(m.weight._local_tensor, WeightWithDynamicFloat8CastTensor)
    ]
    weights: List[DTensor] = [float8_linear.weight for float8_linear in float8_linears]
    if not weights:
        return
    max_weights = torch._foreach_norm(weights, ord=math.inf)  # Partial
    amax_tensor = torch.clamp(torch.stack(max_weights), EPS)  # Replicate
    scale_tensor = torch.finfo(torch.float8_e4m3fn).max / amax_tensor  # Replicate
    local_scale_tensor = scale_tensor.to_local()
    for i, float8_linear in enumerate(float8_linears):
        float8_linear.weight._local_tensor._precomputed_scale = local_scale_tensor[i].to(torch.float32)


_ops_to_preserve_subclass = {
    torch.ops.aten.empty_like.default,
    torch.ops.aten.new_zeros.default,
    torch.ops.aten.slice.Tensor,
    torch.ops.aten.copy_.default,
    torch.ops.aten.view.default,
    torch.ops.aten.as_strided.default,
    torch.ops.aten._to_copy.default,
    torch.ops.aten._pin_memory.default,
    torch.ops.aten.split.Tensor,
    torch.ops.aten.clone.default,
}


class WeightWithDynamicFloat8CastTensor(torch.Tensor):
    @staticmethod
    def __new__(cls, tensor: torch.Tensor, linear_mm_config: LinearMMConfig,
                precomputed_scale: Optional[torch.Tensor] = None):
        return torch.Tensor._make_wrapper_subclass(
            cls,
            tensor.size(),
            strides=tensor.stride(),
            storage_offset=tensor.storage_offset(),
            memory_format=suggest_memory_format(tensor),
            dtype=tensor.dtype,
            layout=tensor.layout,
            device=tensor.device,
            pin_memory=tensor.is_pinned(),
            requires_grad=tensor.requires_grad,
        )

    def __init__(self, tensor: torch.Tensor, linear_mm_config: LinearMMConfig,
                 precomputed_scale: Optional[torch.Tensor] = None):
        self._tensor = tensor
        self._linear_mm_config = linear_mm_config
        self._precomputed_scale = precomputed_scale

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        if func == torch.ops.aten.detach.default:
            return WeightWithDynamicFloat8CastTensor(args[0]._tensor, args[0]._linear_mm_config)
        mm_config: Optional[LinearMMConfig] = None

        def unwrap(t):
            nonlocal mm_config
            if mm_config is None:
                mm_config = t._linear_mm_config
            return t._tensor

        args, kwargs = pytree.tree_map_only(WeightWithDynamicFloat8CastTensor, unwrap, (args, kwargs or {}))
        out = func(*args, **kwargs)
        if func not in _ops_to_preserve_subclass:
            return out
        return pytree.tree_map_only(torch.Tensor, lambda x: WeightWithDynamicFloat8CastTensor(x, mm_config), out)

    def fsdp_pre_all_gather(self, mesh):
        if _FP8_ALL_GATHER_ENABLED:
            # float8 all-gather halves the bytes on the wire
            if self._precomputed_scale is not None:
                float8_tensor = hp_tensor_and_scale_to_float8(
                    self._tensor, self._precomputed_scale, torch.float8_e4m3fn,
                    self._linear_mm_config, GemmInputRole.WEIGHT,
                )
            else:
                float8_tensor = hp_tensor_to_float8_dynamic(
                    self._tensor, e4m3_dtype, self._linear_mm_config,
                    reduce_amax=True, gemm_input_role=GemmInputRole.WEIGHT,
                )
            return (float8_tensor._data,), (float8_tensor._scale,)
        return (self._tensor,), None

    def fsdp_post_all_gather(
        self,
        all_gather_outputs: Tuple[torch.Tensor, ...],
        metadata: Any,
        param_dtype: torch.dtype,
        *,
        out: Optional[torch.Tensor] = None,
    ):
        (data,) = all_gather_outputs
        if metadata is None:
            # high-precision weight; the linear casts it itself
            return data, (data,)
        (scale,) = metadata
        if out is not None:
            out._scale = scale
            return
        return Float8Tensor(data, scale, param_dtype, self._linear_mm_config,
                            gemm_input_role=GemmInputRole.WEIGHT), (data,)
