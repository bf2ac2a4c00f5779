"""Weight wrapper that casts to float8 before the FSDP2 all-gather."""
from typing import Any, Optional, Tuple

import torch
import torch.utils._pytree as pytree

from torchao.float8.float8_scaling_utils import hp_tensor_to_float8_dynamic
from torchao.float8.float8_training_tensor import Float8TrainingTensor, GemmInputRole, hp_tensor_and_scale_to_float8


class WeightWithDynamicFloat8CastTensor(torch.Tensor):
    @staticmethod
    def __new__(cls, tensor, linear_mm_config, dtype, precomputed_scale: Optional[torch.Tensor] = None):
        return torch.Tensor._make_wrapper_subclass(
            cls, tensor.size(), strides=tensor.stride(), storage_offset=tensor.storage_offset(),
            memory_format=None, dtype=tensor.dtype, layout=tensor.layout, device=tensor.device,
            pin_memory=tensor.is_pinned(), requires_grad=tensor.requires_grad,
        )

    def __init__(self, tensor, linear_mm_config, dtype, precomputed_scale=None):
        self._tensor = tensor
        self._linear_mm_config = linear_mm_config
        self._dtype = dtype
        self._precomputed_scale = precomputed_scale

    def __tensor_flatten__(self):
        tensors = ["_tensor"] + (["_precomputed_scale"] if self._precomputed_scale is not None else [])
        return tensors, {"mm_config": self._linear_mm_config, "dtype": self._dtype}

    def fsdp_pre_all_gather(self, mesh) -> Tuple[Tuple[torch.Tensor, ...], Any]:
        cast_before_gather = torch._C.is_grad_enabled()
        if not cast_before_gather:
            return (self._tensor,), None
        if self._precomputed_scale is not None:
            float8_tensor = hp_tensor_and_scale_to_float8(
                self._tensor, self._precomputed_scale, self._dtype,
                self._linear_mm_config, GemmInputRole.WEIGHT,
            )
        else:
            float8_tensor = hp_tensor_to_float8_dynamic(
                self._tensor, self._dtype, self._linear_mm_config,
                reduce_amax=True, gemm_input_role=GemmInputRole.WEIGHT, device_mesh=mesh,
            )
        return (float8_tensor._data,), (float8_tensor._scale,)

    def fsdp_post_all_gather(self, all_gather_outputs, metadata, param_dtype, *, out=None):
        (data,) = all_gather_outputs
        if metadata is None:
            return data, (data,)
        (scale,) = metadata
        if out is not None:
            return
        return Float8TrainingTensor(
            data, scale, param_dtype, self._linear_mm_config, gemm_input_role=GemmInputRole.WEIGHT
        ), (data,)
