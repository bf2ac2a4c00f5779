# adapted from pytorch/pytorch torch/distributed/tensor/_redistribute.py
import logging
from functools import cache
from typing import List, NamedTuple, Tuple, cast

import torch
import torch.distributed._functional_collectives as funcol
import torch.distributed.tensor._api as dtensor
from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta
from torch.distributed.tensor.device_mesh import DeviceMesh
from torch.distributed.tensor.placement_types import Partial, Placement, Replicate, Shard

logger = logging.getLogger(__name__)


class _TransformInfo(NamedTuple):
    mesh_dim: int
    src_dst_placements: Tuple[Placement, Placement]
    # logical_shape on this mesh dimension
    logical_shape: List[int]


@cache
def _gen_transform_infos(src_spec: DTensorSpec, dst_spec: DTensorSpec) -> List[_TransformInfo]:
    src_dim_counts = [0] * src_spec.ndim
    transform_infos: List[_TransformInfo] = []
    initial_logical_shape = list(src_spec.shape)
    mesh_dims_to_logical_shape = [initial_logical_shape]
    for i, src in enumerate(src_spec.placements):
        current_logical_shape = mesh_dims_to_logical_shape[i]
        if isinstance(src, Shard):
            if i < src_spec.mesh.ndim - 1:
                mesh_dim_size = src_spec.mesh.size(mesh_dim=i)
                local_shard_size, _ = src._local_shard_size_and_offset(current_logical_shape[src.dim], mesh_dim_size, 0)
                new_logical_shape = list(current_logical_shape)
                new_logical_shape[src.dim] = local_shard_size
                mesh_dims_to_logical_shape.append(new_logical_shape)
        else:
            mesh_dims_to_logical_shape.append(current_logical_shape)
    for mesh_dim, (current, target) in enumerate(zip(src_spec.placements, dst_spec.placements)):
        if current != target:
            transform_infos.append(
                _TransformInfo(
                    mesh_dim=mesh_dim,
                    src_dst_placements=(current, target),
                    logical_shape=mesh_dims_to_logical_shape[mesh_dim],
                )
            )
    return transform_infos


def redistribute_local_tensor(
    local_tensor: torch.Tensor,
    current_spec: DTensorSpec,
    target_spec: DTensorSpec,
    *,
    async_op: bool = False,
) -> torch.Tensor:
    """
    This redistribute the local tensor (torch.Tensor) from the current DTensorSpec to
    the target DTensorSpec, which involves the necessary collective calls to transform
    the local shard of the DTensor from its current spec to the target spec.
    """
    if current_spec.mesh != target_spec.mesh:
        raise NotImplementedError("Cross device mesh comm not supported yet!")

    new_local_tensor = None
    device_mesh = current_spec.mesh
    my_coordinate = device_mesh.get_coordinate()
    if my_coordinate is None:
        return local_tensor

    transform_infos = _gen_transform_infos(current_spec, target_spec)

    for transform_info in transform_infos:
        i = transform_info.mesh_dim
        current, target = transform_info.src_dst_placements
        num_chunks = device_mesh.size(mesh_dim=i)

        if current == target:
            new_local_tensor = local_tensor
            continue

        logger.debug("redistribute from %s to %s on mesh dim %s", current, target, i)

        if target.is_replicate():
            if current.is_partial():
                partial_spec = cast(Partial, current)
                new_local_tensor = partial_spec._reduce_value(local_tensor, device_mesh, i)
            elif current.is_shard():
                current_placement = cast(Shard, current)
                new_local_tensor = current_placement._to_replicate_tensor(
                    local_tensor, device_mesh, i, transform_info.logical_shape
                )
            else:
                raise RuntimeError(f"redistribute from {current} to {target} not supported yet")
        elif target.is_shard():
            target_placement = cast(Shard, target)
            if current.is_partial():
                partial_spec = cast(Partial, current)
                new_local_tensor = partial_spec._reduce_shard_value(local_tensor, device_mesh, i, target_placement)
            elif current.is_replicate():
                new_local_tensor = target_placement._replicate_to_shard(local_tensor, device_mesh, i, my_coordinate[i])
            else:
                shard_spec = cast(Shard, current)
                if shard_spec.dim != target_placement.dim:
                    new_local_tensor = shard_spec._to_new_shard_dim(
                        local_tensor, device_mesh, i, transform_info.logical_shape, target_placement.dim
                    )
        elif target.is_partial():
            if current.is_replicate():
                partial_spec = cast(Partial, target)
                new_local_tensor = partial_spec._partition_value(local_tensor, device_mesh, i)
            else:
                raise RuntimeError(f"redistribute from {current} to {target} not supported yet")

        assert new_local_tensor is not None
        local_tensor = new_local_tensor

    assert new_local_tensor is not None, "redistribute failed!"

    if not async_op and isinstance(new_local_tensor, funcol.AsyncCollectiveTensor):
        new_local_tensor = new_local_tensor.wait()

    return new_local_tensor


class Redistribute(torch.autograd.Function):
    @staticmethod
    def forward(  # type: ignore[override]
        # pyre-fixme[2]: Parameter must be annotated.
        ctx,
        input: "dtensor.DTensor",
        device_mesh: DeviceMesh,
        placements: Tuple[Placement, ...],
        async_op: bool = False,
    ):
        current_spec = input._spec
        ctx.current_spec = current_spec
        ctx.async_op = async_op

        if current_spec.placements != placements:
            target_spec = DTensorSpec(device_mesh, placements, tensor_meta=input._spec.tensor_meta)
            local_tensor = input._local_tensor
            output = redistribute_local_tensor(local_tensor, current_spec, target_spec, async_op=async_op)
        else:
            # use the same local tensor if placements are the same.
            output = input._local_tensor
            target_spec = current_spec

        return dtensor.DTensor(
            output,
            target_spec,
            requires_grad=input.requires_grad,
        )

    @staticmethod
    def backward(ctx, grad_output: "dtensor.DTensor"):  # type: ignore[override]
        previous_spec = ctx.current_spec
        current_spec = grad_output._spec
        normalized_placements: List[Placement] = []
        for previous_placement in previous_spec.placements:
            if previous_placement.is_partial():
                normalized_placements.append(Replicate())
            else:
                normalized_placements.append(previous_placement)
        spec = DTensorSpec(previous_spec.device_mesh, tuple(normalized_placements), tensor_meta=TensorMeta(shape=grad_output.shape, stride=grad_output.stride(), dtype=grad_output.dtype))
        output = redistribute_local_tensor(grad_output._local_tensor, current_spec, spec, async_op=ctx.async_op)
        output_dtensor = dtensor.DTensor(output, spec, requires_grad=grad_output.requires_grad)
        return (output_dtensor, None, None, None)
