"""Row-parallel output reduction with a choice of flat or two-level (intra/inter-node) all-reduce."""
from dataclasses import dataclass
from typing import Optional

import torch
import torch.distributed as dist


@dataclass
class ReduceGroups:
    tp_group: dist.ProcessGroup
    intra_node_group: Optional[dist.ProcessGroup] = None
    inter_node_group: Optional[dist.ProcessGroup] = None


def _two_level_all_reduce(t: torch.Tensor, groups: ReduceGroups) -> torch.Tensor:
    local = dist.get_world_size(groups.intra_node_group)
    flat = t.contiguous().view(-1)
    pad = (-flat.numel()) % local
    if pad:
        flat = torch.nn.functional.pad(flat, (0, pad))
    shard = torch.empty(flat.numel() // local, dtype=t.dtype, device=t.device)
    dist.reduce_scatter_tensor(shard, flat, group=groups.intra_node_group)
    dist.all_reduce(shard, group=groups.inter_node_group)
    dist.all_gather_into_tensor(flat, shard, group=groups.intra_node_group)
    return flat[: t.numel()].view_as(t)


class _ReduceFromModelParallelRegion(torch.autograd.Function):

    @staticmethod
    def forward(ctx, input_, groups: ReduceGroups, algo: str):
        if dist.get_world_size(groups.tp_group) == 1:
            return input_
        match algo:
            case "two_level":
                return _two_level_all_reduce(input_, groups)
            case "async":
                handle = dist.all_reduce(input_, group=groups.tp_group, async_op=True)
                handle.wait()
                return input_
            case _:
                dist.all_reduce(input_, group=groups.tp_group)
                return input_

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None, None


class RowParallelOutputReducer(torch.nn.Module):

    def __init__(self, groups: ReduceGroups, backend: str = "nccl", hierarchical: bool = True):
        super().__init__()
        self.groups = groups
        self.backend = backend
        self.hierarchical = hierarchical and groups.intra_node_group is not None

    def forward(self, output_parallel: torch.Tensor) -> torch.Tensor:
        match (self.backend, self.hierarchical, torch.is_grad_enabled()):
            case ("nccl", True, True):
                algo = "two_level"
            case ("nccl", _, False):
                algo = "async"
            case _:
                algo = "flat"
        return _ReduceFromModelParallelRegion.apply(output_parallel, self.groups, algo)
