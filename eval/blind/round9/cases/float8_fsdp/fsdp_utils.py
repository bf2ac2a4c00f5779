from typing import Any, Optional, Tuple

import torch
import torch.utils._pytree as pytree

from .config import Float8LinearConfig, _backward_will_run


class Float8TrainingTensor(torch.Tensor):
    @staticmethod
    def __new__(cls, data: torch.Tensor, scale: torch.Tensor, orig_dtype: torch.dtype):
        self = torch.Tensor._make_wrapper_subclass(cls, data.size(), dtype=orig_dtype, device=data.device)
        self._data = data
        self._scale = scale
        self._orig_dtype = orig_dtype
        return self


def hp_tensor_and_scale_to_float8(hp: torch.Tensor, scale: torch.Tensor, float8_dtype) -> Float8TrainingTensor:
    data = (hp.to(torch.float32) * scale).clamp(
        torch.finfo(float8_dtype).min, torch.finfo(float8_dtype).max
    ).to(float8_dtype)
    return Float8TrainingTensor(data, scale, hp.dtype)


def _mesh_reduced_scale(local_shard: torch.Tensor, mesh, float8_dtype) -> torch.Tensor:
    amax = torch.max(torch.abs(local_shard)).to(torch.float64)
    torch.distributed.all_reduce(amax, op=torch.distributed.ReduceOp.MAX, group=mesh.get_group())
    return (torch.finfo(float8_dtype).max / torch.clamp(amax, min=1e-12)).to(torch.float32)


class WeightWithDynamicFloat8CastTensor(torch.Tensor):
    @staticmethod
    def __new__(cls, tensor: torch.Tensor, config: Float8LinearConfig, precomputed_scale: Optional[torch.Tensor] = None):
        return torch.Tensor._make_wrapper_subclass(
            cls, tensor.size(), strides=tensor.stride(), storage_offset=tensor.storage_offset(),
            dtype=tensor.dtype, layout=tensor.layout, device=tensor.device,
            requires_grad=tensor.requires_grad,
        )

    def __init__(self, tensor: torch.Tensor, config: Float8LinearConfig, precomputed_scale=None):
        self._tensor = tensor
        self._config = config
        self._precomputed_scale = precomputed_scale

    def __tensor_flatten__(self):
        return ["_tensor"], self._config

    def fsdp_pre_all_gather(self, mesh, outer_size=None, outer_stride=None, module=None, mp_policy=None):
        if self._config.enable_fsdp_float8_all_gather and _backward_will_run():
            scale = self._precomputed_scale
            if scale is None:
                scale = _mesh_reduced_scale(self._tensor, mesh, self._config.target_dtype)
            float8_tensor = hp_tensor_and_scale_to_float8(self._tensor, scale, self._config.target_dtype)
            return (float8_tensor._data,), (float8_tensor._scale,)
        return (self._tensor,), None

    def fsdp_post_all_gather(self, all_gather_outputs: Tuple[torch.Tensor, ...], metadata: Any,
                             param_dtype: torch.dtype, *, out: Optional[torch.Tensor] = None):
        (data,) = all_gather_outputs
        if metadata is None:
            return data.to(param_dtype), (data,)
        (scale,) = metadata
        return Float8TrainingTensor(data, scale, param_dtype), (data,)
