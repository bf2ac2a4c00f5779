import logging
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.utils._pytree import tree_map_only, flatten_args

logger = logging.getLogger(__name__)


class _PipelineStageBase:
    def __init__(self, submodule: nn.Module, stage_index: int, num_stages: int, device,
                 group: Optional[dist.ProcessGroup] = None, use_batched_p2p: bool = True):
        self.submod = submodule
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.device = device
        self.group = group
        self.use_batched_p2p = use_batched_p2p
        self.fwd_cache: Dict[int, Tuple[Any, List[torch.Tensor]]] = {}
        self.output_chunks: List[Any] = []
        self.act_send_info: Dict[int, List] = {}

    @property
    def is_first(self):
        return self.stage_index == 0

    @property
    def is_last(self):
        return self.stage_index == self.num_stages - 1

    def stage_index_to_group_rank(self, stage_index: int) -> int:
        return stage_index % dist.get_world_size(self.group)

    def forward_one_chunk(self, fwd_chunk_id: int, args: Tuple[Any, ...], kwargs: Optional[Dict[str, Any]] = None):
        composite_args = args if self.is_first else self._retrieve_recv_activations(fwd_chunk_id)
        composite_kwargs = kwargs or {}
        try:
            output = self.submod(*composite_args, **composite_kwargs)
        except Exception as e:
            raise RuntimeError(f"[Stage {self.stage_index}] failed to run forward") from e
        output_tuple = output if isinstance(output, tuple) else (output,)
        self.output_chunks.append(output)
        flat_args = flatten_args(composite_args)
        flat_kwargs = flatten_args(composite_kwargs)
        flatten_input_tensors = flat_args + flat_kwargs
        if torch.is_grad_enabled():
            self.fwd_cache[fwd_chunk_id] = (output_tuple, flatten_input_tensors)
        return output

    def get_fwd_send_ops(self, fwd_chunk_id: int) -> List[dist.P2POp]:
        output_tuple, _ = self.fwd_cache.get(fwd_chunk_id, ((self.output_chunks[-1],), None))
        ops: List[dist.P2POp] = []
        for idx, out in enumerate(output_tuple):
            dst_stages = self.act_send_info.get(idx)
            if dst_stages is None:
                continue
            for dst in dst_stages:
                peer_rank = self.stage_index_to_group_rank(dst)
                peer_global_rank = peer_rank if self.group is None else dist.get_global_rank(self.group, peer_rank)
                ops.append(dist.P2POp(dist.isend, out, peer_global_rank, self.group))
        return ops

    def _retrieve_recv_activations(self, fwd_chunk_id: int):
        raise NotImplementedError


def _sorted_batch_p2p(p2p_ops: List[dist.P2POp], desc: Optional[str] = None):
    ops_by_peer: Dict[int, List[dist.P2POp]] = {}
    for op in p2p_ops:
        ops_by_peer.setdefault(op.peer, []).append(op)
    work = []
    for peer, ops in sorted(ops_by_peer.items()):
        work.extend(dist.batch_isend_irecv(ops))
    return work


def send_forward_activations(stage: _PipelineStageBase, fwd_chunk_id: int):
    ops = stage.get_fwd_send_ops(fwd_chunk_id)
    if not ops:
        return []
    if stage.use_batched_p2p and torch.is_grad_enabled():
        return _sorted_batch_p2p(ops, desc="fwd_send")
    return [dist.isend(op.tensor, op.peer, group=op.group) for op in ops]
