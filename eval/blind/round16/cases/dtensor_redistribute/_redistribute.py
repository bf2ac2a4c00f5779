# adapted from pytorch/pytorch torch/distributed/tensor/_redistribute.py
# Copyright (c) Meta Platforms, Inc. and affiliates
import contextlib
import logging
from functools import cache
from typing import NamedTuple, Optional

import torch
import torch.distributed._functional_collectives as funcol
import torch.distributed.tensor._api as dtensor
from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta
from torch.distributed.tensor._redistribute import get_redistribute_planner
from torch.distributed.tensor.device_mesh import DeviceMesh
from torch.distributed.tensor.placement_types import Partial, Placement, Replicate, Shard

from ._collective_utils import shard_dim_alltoall

logger = logging.getLogger(__name__)

# Global configuration flag to control the redistribution planning strategy.
# When True, forces the graph-based algorithm using Dijkstra's shortest path.
_FORCE_MIN_COST_REDISTRIBUTION_PLAN: bool = False


@contextlib.contextmanager
def use_min_cost_redistribution_plan(enabled: bool = True):
    """Context manager to control the redistribution planning strategy for DTensor operations."""
    global _FORCE_MIN_COST_REDISTRIBUTION_PLAN

    old_value = _FORCE_MIN_COST_REDISTRIBUTION_PLAN
    _FORCE_MIN_COST_REDISTRIBUTION_PLAN = enabled
    try:
        yield
    finally:
        _FORCE_MIN_COST_REDISTRIBUTION_PLAN = old_value


class _TransformInfo(NamedTuple):
    mesh_dim: int
    src_dst_placements: tuple[Placement, Placement]
    # logical_shape on this mesh dimension
    logical_shape: list[int]


def _gen_transform_infos_greedy(src_spec: DTensorSpec, dst_spec: DTensorSpec) -> list[_TransformInfo]:
    transform_infos: list[_TransformInfo] = []
    logical_shape = list(src_spec.shape)
    for i, (src, dst) in enumerate(zip(src_spec.placements, dst_spec.placements)):
        if src != dst:
            transform_infos.append(_TransformInfo(mesh_dim=i, src_dst_placements=(src, dst), logical_shape=logical_shape))
    return transform_infos


@cache
def _gen_transform_infos(src_spec: DTensorSpec, dst_spec: DTensorSpec, use_graph_based_transform: bool) -> list[_TransformInfo]:
    if use_graph_based_transform:
        planner = get_redistribute_planner(src_spec.device_mesh, src_spec.tensor_meta)
        return planner.generate_graph_based_transform_infos(src_spec, dst_spec, src_spec.shape)
    return _gen_transform_infos_greedy(src_spec, dst_spec)


def redistribute_local_tensor(
    local_tensor: torch.Tensor,
    current_spec: DTensorSpec,
    target_spec: DTensorSpec,
    *,
    async_op: bool = False,
    is_backward: bool = False,
) -> torch.Tensor:
    """Redistribute the local tensor from the current DTensorSpec to the target DTensorSpec."""
    if current_spec.mesh != target_spec.mesh:
        raise NotImplementedError("Cross device mesh comm not supported yet!")

    new_local_tensor = local_tensor
    device_mesh = current_spec.mesh
    if not device_mesh._is_current_rank_part_of_mesh():
        return local_tensor

    use_graph = _FORCE_MIN_COST_REDISTRIBUTION_PLAN or not current_spec.is_default_device_order()
    transform_infos = _gen_transform_infos(current_spec, target_spec, use_graph)

    for transform_info in transform_infos:
        i = transform_info.mesh_dim
        current, target = transform_info.src_dst_placements
        num_chunks = device_mesh.size(mesh_dim=i)
        if current == target:
            new_local_tensor = local_tensor
            continue
        if num_chunks == 1:
            new_local_tensor = local_tensor
            continue
        if target.is_replicate():
            if current.is_partial():
                new_local_tensor = current._reduce_value(local_tensor, device_mesh, i)
            else:
                new_local_tensor = current._to_replicate_tensor(local_tensor, device_mesh, i, transform_info.logical_shape)
        elif target.is_shard():
            if current.is_partial():
                new_local_tensor = current._reduce_shard_value(local_tensor, device_mesh, i, target)
            elif current.is_replicate():
                new_local_tensor = target._replicate_to_shard(local_tensor, device_mesh, i, device_mesh.get_local_rank(i))
            else:
                # Shard(a) -> Shard(b)
                new_local_tensor = shard_dim_alltoall(
                    local_tensor, current.dim, target.dim, device_mesh, i,
                    allow_alltoall=torch.is_grad_enabled(),
                )
        elif target.is_partial():
            new_local_tensor = target._partition_value(local_tensor, device_mesh, i) if current.is_replicate() else local_tensor
        local_tensor = new_local_tensor

    if not async_op and isinstance(new_local_tensor, funcol.AsyncCollectiveTensor):
        new_local_tensor = new_local_tensor.wait()
    return new_local_tensor


class Redistribute(torch.autograd.Function):
    @staticmethod
    def forward(  # type: ignore[override]
        ctx,
        input: "dtensor.DTensor",
        device_mesh: DeviceMesh,
        placements: tuple[Placement, ...],
        async_op: bool = False,
        forward_dtype: Optional[torch.dtype] = None,
        backward_dtype: Optional[torch.dtype] = None,
    ):
        ctx.async_op = async_op
        ctx.backward_dtype = backward_dtype
        ctx.original_dtype = input._local_tensor.dtype

        local_tensor = input._local_tensor
        if forward_dtype is not None and forward_dtype != local_tensor.dtype:
            local_tensor = local_tensor.to(dtype=forward_dtype)
        current_spec = input._spec
        ctx.current_spec = current_spec

        if current_spec.placements != placements:
            target_spec = DTensorSpec(device_mesh, placements, tensor_meta=current_spec.tensor_meta)
            output = redistribute_local_tensor(local_tensor, current_spec, target_spec, async_op=async_op)
        else:
            # use the same local tensor if placements are the same.
            output = local_tensor
            target_spec = current_spec

        return dtensor.DTensor(output, target_spec, requires_grad=input.requires_grad)

    @staticmethod
    def backward(ctx, grad_output: "dtensor.DTensor"):  # type: ignore[override]
        previous_spec = ctx.current_spec
        local_tensor = grad_output._local_tensor
        if ctx.backward_dtype is not None and ctx.backward_dtype != local_tensor.dtype:
            local_tensor = local_tensor.to(ctx.backward_dtype)
        normalized_placements: list[Placement] = [
            Replicate() if previous.is_partial() else previous for previous in previous_spec.placements
        ]
        previous_spec = DTensorSpec(previous_spec.device_mesh, tuple(normalized_placements),
                                    tensor_meta=previous_spec.tensor_meta)
        output = redistribute_local_tensor(local_tensor, grad_output._spec, previous_spec,
                                           async_op=ctx.async_op, is_backward=True)
        if output.dtype != ctx.original_dtype:
            output = output.to(ctx.original_dtype)
        output_dtensor = dtensor.DTensor(output, previous_spec, requires_grad=grad_output.requires_grad)
        return output_dtensor, None, None, None, None, None
