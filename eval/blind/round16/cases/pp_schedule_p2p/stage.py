# adapted from pytorch/pytorch torch/distributed/pipelining/stage.py
# Copyright (c) Meta Platforms, Inc. and affiliates
import logging
from abc import ABC
from typing import Any, Optional, Union

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.fx.node import map_aggregate
from torch.distributed.pipelining._backward import stage_backward
from torch.nn.parallel import DistributedDataParallel

from ._p2p import _build_p2p_edge_groups, _resolve_p2p_group

logger = logging.getLogger(__name__)


def _normalize_model_output_as_tuple(output: Any) -> tuple[Any]:
    if type(output) is list:
        output = tuple(output)
    return output if type(output) is tuple else (output,)


class _RootArgPlaceholder:
    def __init__(self, tensor):
        self.meta = tensor.to("meta")


class _RecvInfo:
    def __init__(self, input_name: str, source: int, buffer: torch.Tensor):
        self.input_name = input_name
        self.source = source
        self.buffer = buffer


InputInfo = Union[_RecvInfo, _RootArgPlaceholder]


class _PipelineStageBase(ABC):
    # set by the schedule at the start of every step
    record_graph: bool = True

    def __init__(
        self,
        submodule: torch.nn.Module,
        stage_index: int,
        num_stages: int,
        device: torch.device,
        group: Optional[dist.ProcessGroup] = None,
    ):
        super().__init__()
        self.submod = submodule
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.device = device
        self.group = group
        self.group_rank = dist.get_rank(self.group)
        self.group_size = dist.get_world_size(self.group)
        self.fwd_cache: dict[int, tuple[Any, list[torch.Tensor]]] = {}
        self.bwd_cache: dict[int, tuple[Optional[torch.Tensor], ...]] = {}
        self.output_chunks: list[Any] = []
        self.has_backward = False
        self.log_prefix = f"[Stage {self.stage_index}]"
        self.args_recv_info: dict[int, tuple[InputInfo, ...]] = {}
        self.act_send_info: dict[int, list] = {}
        self.stage_index_to_group_rank: dict[int, int] = {i: i % self.group_size for i in range(self.num_stages)}
        self._edge_groups = _build_p2p_edge_groups(self.group, self.stage_index_to_group_rank, device)

    @property
    def is_first(self):
        return self.stage_index == 0

    @property
    def is_last(self):
        return self.stage_index == self.num_stages - 1

    @property
    def defer_send_waits(self) -> bool:
        """Whether activation sends may stay in flight until the end of the forward phase."""
        return self.record_graph and not self.is_last

    def handle_fwd_send_works(self, works: dict[int, list[dist.Work]], pending: list[list[dist.Work]]) -> None:
        """Either keep the send works of one microbatch in flight or wait for them now."""
        if self.defer_send_waits:
            pending.extend(works.values())
        else:
            for work in works.values():
                for w in work:
                    w.wait()

    def _p2p_group(self, src_rank: int, dst_rank: int) -> Optional[dist.ProcessGroup]:
        return _resolve_p2p_group(self.group, self._edge_groups, (src_rank, dst_rank), torch.is_grad_enabled())

    def _get_recv_ops(self, recv_infos: tuple[InputInfo, ...]) -> list[dist.P2POp]:
        ops: list[dist.P2POp] = []
        for info in recv_infos:
            if not isinstance(info, _RecvInfo):
                continue
            peer_rank = self.stage_index_to_group_rank[info.source]
            peer_global_rank = peer_rank if self.group is None else dist.get_global_rank(self.group, peer_rank)
            ops.append(
                dist.P2POp(dist.irecv, info.buffer, peer_global_rank, self._p2p_group(peer_rank, self.group_rank))
            )
        return ops

    def get_fwd_recv_ops(self, fwd_chunk_id: int) -> list[dist.P2POp]:
        return self._get_recv_ops(self.args_recv_info[fwd_chunk_id])

    def get_fwd_send_ops(self, fwd_chunk_id: int) -> list[dist.P2POp]:
        output_tuple, _ = self.fwd_cache[fwd_chunk_id]
        ops: list[dist.P2POp] = []
        for idx, out in enumerate(output_tuple):
            for dst in self.act_send_info[idx]:
                if dst is None:
                    continue
                peer_rank = self.stage_index_to_group_rank[dst]
                peer_global_rank = peer_rank if self.group is None else dist.get_global_rank(self.group, peer_rank)
                ops.append(dist.P2POp(dist.isend, out, peer_global_rank, self.group))
        return ops

    def clear_runtime_states(self) -> None:
        self.fwd_cache.clear()
        self.output_chunks.clear()
        for recv_tuple in self.args_recv_info.values():
            for a in recv_tuple:
                if isinstance(a, _RecvInfo):
                    a.buffer.grad = None

    def _retrieve_recv_activations(self, fwd_chunk_id: int):
        def get_recv_tensor(info):
            return info.buffer

        return map_aggregate(self.args_recv_info[fwd_chunk_id], get_recv_tensor)

    def forward_maybe_with_nosync(self, *args, **kwargs):
        if isinstance(self.submod, DistributedDataParallel):
            with self.submod.no_sync():  # type: ignore[operator]
                return self.submod(*args, **kwargs)
        return self.submod(*args, **kwargs)

    def forward_one_chunk(self, fwd_chunk_id: int, args: tuple[Any, ...], kwargs: Optional[dict[str, Any]] = None):
        composite_args = args if self.is_first else self._retrieve_recv_activations(fwd_chunk_id)
        composite_kwargs = kwargs or {}
        output = self.forward_maybe_with_nosync(*composite_args, **composite_kwargs)
        output_tuple = _normalize_model_output_as_tuple(output)
        if self.is_last:
            self.output_chunks.append(output)
        # Save activations and inputs for backward
        flat_inputs = [a for a in (*composite_args, *composite_kwargs.values()) if isinstance(a, torch.Tensor)]
        input_values = flat_inputs if self.record_graph else []
        self.fwd_cache[fwd_chunk_id] = (output_tuple, input_values)
        logger.debug("%s Forwarded chunk %s", self.log_prefix, fwd_chunk_id)
        return output

    def backward_one_chunk(self, bwd_chunk_id: int, loss=None, full_backward: bool = True, last_backward=False):
        # skip backward computation if backward is not enabled
        if not self.has_backward:
            return
        stage_output, input_values = self.fwd_cache.pop(bwd_chunk_id)
        if self.is_last:
            grads_input = stage_backward(loss, None, input_values)
        else:
            grads_output = tuple(info.buffer for info in self.args_recv_info[bwd_chunk_id])
            grads_input = stage_backward(stage_output, grads_output, input_values)
        self.bwd_cache[bwd_chunk_id] = grads_input


class PipelineStage(_PipelineStageBase):
    def __init__(self, submodule: nn.Module, stage_index: int, num_stages: int, device: torch.device,
                 group: Optional[dist.ProcessGroup] = None):
        super().__init__(submodule, stage_index, num_stages, device, group)
