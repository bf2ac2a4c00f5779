# adapted from pytorch/pytorch torch/distributed/pipelining/_p2p.py
# Copyright (c) Meta Platforms, Inc. and affiliates
import itertools
import logging

import torch
import torch.distributed as dist
from torch._logging import warning_once

logger = logging.getLogger(__name__)

_StageRankAssignment = tuple[int, ...]
_DirectedRankEdge = tuple[int, int]
_DirectedP2PGroupMap = dict[_DirectedRankEdge, dist.ProcessGroup]


def _stage_rank_assignment(stage_index_to_group_rank: dict[int, int], group_size: int) -> _StageRankAssignment:
    """Return the physical pipeline-group rank assigned to each logical stage."""
    assignment = tuple(stage_index_to_group_rank[i] for i in range(len(stage_index_to_group_rank)))
    if any(rank < 0 or rank >= group_size for rank in assignment):
        raise ValueError(f"Pipeline stage mapping contains a rank outside [0, {group_size})")
    return assignment


def _directed_edge_split_rounds(stage_rank_assignment: _StageRankAssignment) -> tuple[tuple[_DirectedRankEdge, ...], ...]:
    """Partition adjacent physical-rank edges into collective split rounds."""
    remaining_edges = sorted(
        {
            (min(source, destination), max(source, destination))
            for source, destination in itertools.pairwise(stage_rank_assignment)
            if source != destination
        }
    )
    split_rounds = []
    while remaining_edges:
        used_ranks: set[int] = set()
        matching, deferred = [], []
        for edge in remaining_edges:
            if edge[0] in used_ranks or edge[1] in used_ranks:
                deferred.append(edge)
                continue
            matching.append(edge)
            used_ranks.update(edge)
        split_rounds.append(tuple(matching))
        split_rounds.append(tuple((d, s) for s, d in matching))
        remaining_edges = deferred
    return tuple(split_rounds)


def _warn_if_eager_nccl(group: dist.ProcessGroup | None) -> None:
    if dist.get_backend(group) not in {"nccl", "nccl2"}:
        return
    warning_once(
        logger,
        "Pipeline parallelism is using an eager NCCL communicator. Consider creating its process group "
        'with backend="nccl-lazy" so traffic to different peers can overlap.',
    )


def _build_p2p_edge_groups(
    group: dist.ProcessGroup | None,
    stage_index_to_group_rank: dict[int, int],
    device: torch.device,
) -> _DirectedP2PGroupMap:
    """Create child groups for a schedule's directed rank edges."""
    parent = group if group is not None else dist.distributed_c10d._get_default_group()
    group_rank = dist.get_rank(parent)
    assignment = _stage_rank_assignment(stage_index_to_group_rank, dist.get_world_size(parent))
    groups: _DirectedP2PGroupMap = {}
    for round_index, round_edges in enumerate(_directed_edge_split_rounds(assignment)):
        child = dist.split_group(
            parent_pg=parent,
            split_ranks=[list(edge) for edge in round_edges],
            group_desc=f"pp_p2p_round_{round_index}",
        )
        local_edge = next((edge for edge in round_edges if group_rank in edge), None)
        if local_edge is not None:
            groups[local_edge] = child
    return groups


def _resolve_p2p_group(
    parent: dist.ProcessGroup | None,
    groups: _DirectedP2PGroupMap,
    edge: _DirectedRankEdge,
    use_edge_groups: bool,
) -> dist.ProcessGroup | None:
    """Pick the communicator that carries one directed rank edge."""
    if use_edge_groups and edge in groups:
        # a dedicated child communicator lets traffic to different peers overlap
        return groups[edge]
    return parent
