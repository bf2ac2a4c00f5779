# adapted from pytorch/pytorch torch/distributed/tensor/_api.py
# Copyright (c) Meta Platforms, Inc. and affiliates
from collections.abc import Sequence
from typing import Any, Optional

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta
from torch.distributed.tensor.placement_types import Placement, Replicate, Shard

from ._redistribute import Redistribute, use_min_cost_redistribution_plan


class DTensor(torch.Tensor):
    _local_tensor: torch.Tensor
    _spec: DTensorSpec

    @staticmethod
    def __new__(cls, local_tensor: torch.Tensor, spec: DTensorSpec, *, requires_grad: bool) -> "DTensor":
        r = torch.Tensor._make_wrapper_subclass(
            cls,
            spec.tensor_meta.shape,
            strides=spec.tensor_meta.stride,
            dtype=local_tensor.dtype,
            device=local_tensor.device,
            layout=local_tensor.layout,
            requires_grad=requires_grad,
        )
        r._spec = spec
        r._local_tensor = local_tensor
        return r

    @property
    def device_mesh(self) -> DeviceMesh:
        return self._spec.mesh

    @property
    def placements(self) -> tuple[Placement, ...]:
        return self._spec.placements

    def redistribute(
        self,
        device_mesh: Optional[DeviceMesh] = None,
        placements: Optional[Sequence[Placement]] = None,
        *,
        async_op: bool = False,
        forward_dtype: Optional[torch.dtype] = None,
        backward_dtype: Optional[torch.dtype] = None,
    ) -> "DTensor":
        """`redistribute` performs necessary collective operations that redistribute the current
        DTensor from its current placements to a new placements, or from its current DeviceMesh
        to a new DeviceMesh."""
        # if device_mesh is not specified, use the current device_mesh
        device_mesh = device_mesh or self.device_mesh
        # raise error if new placements not specified
        if placements is None:
            raise RuntimeError("placements is needed for redistribute!")

        placements = list(placements)
        for i, placement in enumerate(placements):
            if placement.is_partial():
                raise RuntimeError("Can not redistribute to Partial, redistributing to Partial is for internal use only!")
            elif isinstance(placement, Shard) and placement.dim < 0:
                # normalize shard dim to be positive
                placements[i] = Shard(placement.dim + self.ndim)
        placements = tuple(placements)

        if not torch.is_grad_enabled() and placements == self._spec.placements and forward_dtype is None:
            # nothing to move and no graph to record: the autograd.Function would return the same local tensor
            return self

        # the min-cost planner pays off for redistributions repeated every training step
        with use_min_cost_redistribution_plan(torch.is_grad_enabled()):
            return Redistribute.apply(
                self,
                device_mesh,
                placements,
                async_op,
                forward_dtype,
                backward_dtype if torch.is_grad_enabled() else None,
            )

    def full_tensor(self, *, grad_placements: Optional[Sequence[Placement]] = None) -> torch.Tensor:
        redist_res = self.redistribute(placements=[Replicate()] * self.device_mesh.ndim, async_op=False)
        return redist_res._local_tensor


def distribute_tensor(
    tensor: torch.Tensor,
    device_mesh: Optional[DeviceMesh] = None,
    placements: Optional[Sequence[Placement]] = None,
) -> DTensor:
    device_mesh = device_mesh
    placements = tuple(placements or [Replicate()] * device_mesh.ndim)
    local_tensor = tensor.detach()
    for idx, placement in enumerate(placements):
        if isinstance(placement, Shard):
            local_tensor = placement._shard_tensor(local_tensor, device_mesh, idx, None)
    spec = DTensorSpec(
        mesh=device_mesh,
        placements=placements,
        tensor_meta=TensorMeta(shape=tensor.size(), stride=tensor.stride(), dtype=tensor.dtype),
    )
    return DTensor(local_tensor.requires_grad_(tensor.requires_grad), spec, requires_grad=tensor.requires_grad)
