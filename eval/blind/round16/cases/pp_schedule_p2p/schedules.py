# adapted from pytorch/pytorch torch/distributed/pipelining/schedules.py
# Copyright (c) Meta Platforms, Inc. and affiliates
import logging
from collections import defaultdict
from typing import Any, Callable, Optional

import torch
import torch.distributed as dist
from torch.profiler import record_function

from .stage import _PipelineStageBase

logger = logging.getLogger(__name__)


def _batch_p2p(p2p_ops: list[dist.P2POp], desc: Optional[str] = None) -> list[dist.Work]:
    """Simple wrapper over batch_isend_irecv from torch.distributed, which just adds a descriptive logger on top."""
    if len(p2p_ops) == 0:
        return []
    desc_str = f"{desc}, " if desc else ""
    logger.debug("batch_p2p %s%s", desc_str, p2p_ops)
    return dist.batch_isend_irecv(p2p_ops)


def _single_batch_p2p(p2p_ops: list[dist.P2POp], desc: Optional[str] = None) -> dict[int, list[dist.Work]]:
    """All ops of this step in one batch_isend_irecv call."""
    works = _batch_p2p(p2p_ops, desc=desc)
    return {0: works} if works else {}


def _sorted_batch_p2p(p2p_ops: list[dist.P2POp], desc: Optional[str] = None) -> dict[int, list[dist.Work]]:
    """Sorts the list of P2P ops by the peer rank, and then calls batch_isend_irecv per peer."""
    ops_by_peer: dict[int, list[dist.P2POp]] = defaultdict(list)
    work_by_peer: dict[int, list[dist.Work]] = {}
    if len(p2p_ops) == 0:
        return work_by_peer
    for op in p2p_ops:
        ops_by_peer[op.peer].append(op)
    for peer, ops in sorted(ops_by_peer.items()):
        work_by_peer[peer] = _batch_p2p(ops, desc=desc)
    return work_by_peer


def _wait_batch_p2p(work: list[dist.Work]):
    for w in work:
        w.wait()


class PipelineScheduleSingle:
    def __init__(self, stage: _PipelineStageBase, n_microbatches: int, loss_fn: Optional[Callable] = None,
                 scale_grads: bool = True):
        self._stage = stage
        self._n_microbatches = n_microbatches
        self._loss_fn = loss_fn
        self.scale_grads = scale_grads
        self._has_backward = self._loss_fn is not None
        # Set the same has_backward flag for stage object
        self._stage.has_backward = self._has_backward

    def _split_inputs(self, args, kwargs):
        args_split = [tuple(a.tensor_split(self._n_microbatches)[i] for a in args) for i in range(self._n_microbatches)]
        return args_split, [kwargs or {}] * self._n_microbatches

    def step(self, *args, target=None, losses: Optional[list] = None, **kwargs):
        # Clean per iteration
        self._stage.clear_runtime_states()
        self._stage.record_graph = torch.is_grad_enabled()
        args_split, kwargs_split = self._split_inputs(args, kwargs)
        targets_split = list(torch.tensor_split(target, self._n_microbatches)) if target is not None else None
        self._step_microbatches(args_split, kwargs_split, targets_split, losses)
        if self._stage.is_last:
            return torch.cat(self._stage.output_chunks)
        return None

    def _step_microbatches(self, arg_mbs, kwarg_mbs, target_mbs, losses):
        raise NotImplementedError


class ScheduleGPipe(PipelineScheduleSingle):
    """The GPipe schedule. Will go through all the microbatches in a fill-drain manner."""

    def _step_microbatches(self, arg_mbs=None, kwarg_mbs=None, target_mbs=None, losses=None):
        # per-peer batches let receives from different peers progress independently
        per_peer = getattr(self._stage, "record_graph", True)
        recv_p2p = _sorted_batch_p2p if per_peer else _single_batch_p2p
        fwd_sends_to_wait: list[list[dist.Work]] = []

        for i in range(self._n_microbatches):
            with record_function(f"Forward {i}"):
                ops = self._stage.get_fwd_recv_ops(i)
                works = recv_p2p(ops, desc="fwd_recv")
                for work in works.values():
                    _wait_batch_p2p(work)

                output = self._stage.forward_one_chunk(i, arg_mbs[i], kwarg_mbs[i])  # type: ignore[index]

                ops = self._stage.get_fwd_send_ops(i)
                works = _sorted_batch_p2p(ops, desc="fwd_send")
                self._stage.handle_fwd_send_works(works, fwd_sends_to_wait)
            if self._stage.is_last and target_mbs is not None and losses is not None:
                losses.append(self._loss_fn(output, target_mbs[i]))
            logger.debug("[%s] Forwarded microbatch %s", self._stage.stage_index, i)

        # Wait for all forward sends to finish
        for work in fwd_sends_to_wait:
            _wait_batch_p2p(work)

        # No backward phase for an evaluation step: nothing was recorded
        if not (self._has_backward and self._stage.record_graph):
            return
        for i in range(self._n_microbatches):
            with record_function(f"Backward {i}"):
                self._stage.backward_one_chunk(i, loss=losses[i] if losses else None,
                                               last_backward=i == self._n_microbatches - 1)
