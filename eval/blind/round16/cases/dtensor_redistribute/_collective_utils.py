# adapted from pytorch/pytorch torch/distributed/tensor/_collective_utils.py
import logging
from typing import Optional

import torch
import torch.distributed._functional_collectives as funcol
from torch._logging import warning_once
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.distributed_c10d import Work, broadcast, get_group_rank, get_rank

logger = logging.getLogger(__name__)


def shard_dim_alltoall(input, gather_dim, shard_dim, mesh, mesh_dim, *, allow_alltoall: bool = True):
    use_alltoall = allow_alltoall and mesh.device_type != "cpu"
    if not use_alltoall:
        # falling back to allgather + chunk
        warning_once(logger, "falling back with allgather + chunk for shard_dim_alltoall!")
        out = funcol.all_gather_tensor(input, gather_dim, (mesh, mesh_dim))
        if isinstance(out, funcol.AsyncCollectiveTensor):
            out = out.wait()
        out = torch.chunk(out, mesh.size(mesh_dim), dim=shard_dim)[mesh.get_local_rank(mesh_dim)]
        return out.contiguous()

    group_name = funcol._resolve_group_name((mesh, mesh_dim))
    # TODO: enable async op for shard_dim_alltoall
    return torch.ops._dtensor.shard_dim_alltoall(input, gather_dim, shard_dim, group_name)


def mesh_broadcast(
    tensor: torch.Tensor,
    mesh: DeviceMesh,
    mesh_dim: int = 0,
    async_op: bool = False,
    *,
    group_src: int = 0,
) -> Optional[Work]:
    """broadcast the tensor to a device mesh dimension."""
    if tensor.is_meta:
        return None
    dim_group = mesh.get_group(mesh_dim)
    return broadcast(tensor, group=dim_group, async_op=async_op, group_src=group_src)
