"""Modelled on PyTorch torch/distributed/pipelining/stage.py (_PipelineStageBase.forward_one_chunk,
get_fwd_send_ops) and schedules.py (_batch_p2p, _sorted_batch_p2p)."""
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch.distributed.pipelining.schedules import _batch_p2p, _sorted_batch_p2p


class _PipelineStageBase:
    def __init__(self, submodule, stage_index, num_stages, device, group=None):
        self.submod = submodule
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.device = device
        self.group = group
        self.fwd_cache: Dict[int, Tuple[Any, List[torch.Tensor]]] = {}
        self.output_chunks: List[Any] = []
        self.has_backward = True
        self.act_send_info: Dict[int, List] = {}

    @property
    def is_last(self):
        return self.stage_index == self.num_stages - 1

    def forward_one_chunk(self, fwd_chunk_id: int, args: Tuple[Any, ...], kwargs: Optional[Dict[str, Any]] = None):
        composite_args = self._retrieve_recv_activations(fwd_chunk_id) if self.stage_index > 0 else args
        composite_kwargs = kwargs or {}
        output = self.submod(*composite_args, **composite_kwargs)
        output_tuple = output if isinstance(output, tuple) else (output,)
        self.output_chunks.append(output)
        flatten_input_tensors = [a for a in composite_args if isinstance(a, torch.Tensor)]
        if self.has_backward and torch.is_grad_enabled():
            self.fwd_cache[fwd_chunk_id] = (output_tuple, flatten_input_tensors)
        return output

    def get_fwd_send_ops(self, fwd_chunk_id: int) -> List[dist.P2POp]:
        output_tuple, _ = self.fwd_cache.get(fwd_chunk_id, ((self.output_chunks[fwd_chunk_id],), None))
        ops: List[dist.P2POp] = []
        for idx, out in enumerate(output_tuple):
            for dst in self.act_send_info.get(idx, []):
                if dst is None:
                    continue
                peer_global_rank = dist.get_global_rank(self.group, dst) if self.group is not None else dst
                ops.append(dist.P2POp(dist.isend, out, peer_global_rank, self.group))
        return ops

    def _retrieve_recv_activations(self, fwd_chunk_id):
        raise NotImplementedError


class ScheduleGPipe:
    def __init__(self, stage: _PipelineStageBase, n_microbatches: int):
        self._stage = stage
        self._n_microbatches = n_microbatches

    def _step_microbatches(self, arg_mbs, kwarg_mbs):
        fwd_sends_to_wait: List[dist.Work] = []
        # coalesced batch_isend_irecv only while training; eval sends one by one in rank order
        coalesce = torch.is_grad_enabled()
        for i in range(self._n_microbatches):
            self._stage.forward_one_chunk(i, arg_mbs[i], kwarg_mbs[i])
            ops = self._stage.get_fwd_send_ops(i)
            works = _batch_p2p(ops, desc="fwd_send") if coalesce else _sorted_batch_p2p(ops, desc="fwd_send")
            fwd_sends_to_wait.extend(works.values() if isinstance(works, dict) else [works])
        for work in fwd_sends_to_wait:
            if work is not None:
                work.wait()
