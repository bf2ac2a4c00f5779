# adapted from pytorch/pytorch torch/distributed/pipelining/schedules.py
import logging
from abc import ABC, abstractmethod
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch.profiler import record_function

from torch.distributed.pipelining.microbatch import merge_chunks, split_args_kwargs_into_chunks, TensorChunkSpec
from torch.distributed.pipelining.stage import _PipelineStageBase

logger = logging.getLogger(__name__)


def _batch_p2p(p2p_ops: List[dist.P2POp], desc: Optional[str] = None) -> Optional[dist.Work]:
    """Simple wrapper over batch_isend_irecv from torch.distributed, which just adds a descriptive logger on top."""
    if len(p2p_ops) == 0:
        return None
    desc_str = f"{desc}, " if desc else ""
    logger.debug("batch_p2p %s%s", desc_str, p2p_ops)
    return dist.batch_isend_irecv(p2p_ops).pop()


def _sorted_batch_p2p(p2p_ops: List[dist.P2POp], desc: Optional[str] = None) -> Dict[int, dist.Work]:
    ops_by_peer: Dict[int, List[dist.P2POp]] = {}
    work_by_peer: Dict[int, dist.Work] = {}
    if len(p2p_ops) == 0:
        return work_by_peer
    for op in p2p_ops:
        ops_by_peer.setdefault(op.peer, []).append(op)
    for peer, ops in sorted(ops_by_peer.items()):
        work_by_peer[peer] = _batch_p2p(ops, desc=desc)
    return work_by_peer


def _wait_batch_p2p(work):
    if work is None:
        return
    if isinstance(work, list):
        for w in work:
            w.wait()
    else:
        work.wait()


class _PipelineSchedule(ABC):
    def __init__(
        self,
        n_microbatches: int,
        loss_fn: Optional[Callable[..., torch.Tensor]] = None,
        args_chunk_spec: Optional[Tuple[TensorChunkSpec, ...]] = None,
        kwargs_chunk_spec: Optional[Dict[str, TensorChunkSpec]] = None,
        output_merge_spec: Optional[Any] = None,
        scale_grads: bool = True,
    ):
        self._n_microbatches = n_microbatches
        self._loss_fn = loss_fn
        self.scale_grads = scale_grads
        self._args_chunk_spec = args_chunk_spec
        self._kwargs_chunk_spec = kwargs_chunk_spec
        self._output_merge_spec = output_merge_spec
        self._has_backward = self._loss_fn is not None
        self._internal_losses: List[torch.Tensor] = []

    def _maybe_compute_loss(self, stage, output, target_mbs, mb_index):
        if stage.is_last and self._has_backward:
            loss = self._compute_loss(output, target_mbs[mb_index])  # type: ignore[index]
            self._internal_losses.append(loss)

    def _maybe_get_loss(self, stage, mb_index):
        valid_index = 0 <= mb_index < len(self._internal_losses)
        if stage.is_last and self._has_backward and valid_index:
            return self._internal_losses[mb_index]
        elif len(self._internal_losses) != 0 and not valid_index:
            raise RuntimeError(f"Loss for microbatch {mb_index} is not available.")
        return None

    def _compute_loss(self, output, target):
        return self._loss_fn(output, target)  # type: ignore[misc]

    def _split_inputs(self, args: Tuple[Any, ...], kwargs: Optional[Dict[str, Any]] = None):
        if args or kwargs:
            return split_args_kwargs_into_chunks(
                args, kwargs, self._n_microbatches, self._args_chunk_spec, self._kwargs_chunk_spec
            )
        return [()] * self._n_microbatches, [{}] * self._n_microbatches

    def _merge_outputs(self, output_chunks: List[Any]) -> Any:
        return merge_chunks(output_chunks, self._output_merge_spec)

    @abstractmethod
    def _step_microbatches(self, arg_mbs=None, kwarg_mbs=None, target_mbs=None, losses=None, return_outputs=True):
        raise NotImplementedError


class PipelineScheduleSingle(_PipelineSchedule):
    def __init__(self, stage: _PipelineStageBase, n_microbatches: int, loss_fn=None, **kwargs):
        super().__init__(n_microbatches=n_microbatches, loss_fn=loss_fn, **kwargs)
        self._stage = stage
        self._num_stages = stage.num_stages
        self._stage_initialized = False

    def _initialize_stage(self, args, kwargs):
        if not self._stage_initialized:
            self._stage._prepare_forward_infra(self._n_microbatches, args, kwargs)
            if self._has_backward:
                self._stage._prepare_backward_infra(self._n_microbatches)
            self._stage_initialized = True

    def step(self, *args, target=None, losses: Optional[List] = None, return_outputs: bool = True, **kwargs):
        """
        Run one iteration of the pipeline schedule with *whole-batch* input.
        Will chunk the input into microbatches automatically, and go through the
        microbatches according to the schedule implementation.
        """
        if self._has_backward and not torch.is_grad_enabled():
            raise RuntimeError(
                "step() requires gradients to be enabled for backward computation; "
                "it should not be used under torch.no_grad() context. "
                "Please call eval() instead."
            )

        self._stage.has_backward = self._has_backward
        self._stage.clear_runtime_states()

        args_split, kwargs_split = self._split_inputs(args, kwargs)
        if target is not None:
            targets_split = list(torch.tensor_split(target, self._n_microbatches))
        else:
            targets_split = None

        self._step_microbatches(args_split, kwargs_split, targets_split, losses, return_outputs)

        if self._stage.is_last and return_outputs:
            return self._merge_outputs(self._stage.output_chunks)
        return None


class ScheduleGPipe(PipelineScheduleSingle):
    """
    The GPipe schedule.
    Will go through all the microbatches in a fill-drain manner.
    """

    def _step_microbatches(self, arg_mbs=None, kwarg_mbs=None, target_mbs=None, losses=None, return_outputs=True):
        self._initialize_stage(arg_mbs[0], kwarg_mbs[0])

        # Delay send waits
        fwd_sends_to_wait: List[dist.Work] = []

        # Run microbatches
        for i in range(self._n_microbatches):
            with record_function(f"Forward {i}"):
                ops = self._stage.get_fwd_recv_ops(i)
                works = _sorted_batch_p2p(ops, desc="fwd_recv")
                for work in works.values():
                    _wait_batch_p2p(work)

                output = self._stage.forward_one_chunk(
                    i, arg_mbs[i], kwarg_mbs[i], save_forward_output=return_outputs
                )  # type: ignore[index]

                ops = self._stage.get_fwd_send_ops(i)
                works = _sorted_batch_p2p(ops, desc="fwd_send")
                if torch.is_grad_enabled():
                    fwd_sends_to_wait.extend(works.values())
                else:
                    for work in works.values():
                        _wait_batch_p2p(work)

            logger.debug("[%s] Forwarded microbatch %s", self._stage.stage_index, i)
            self._maybe_compute_loss(self._stage, output, target_mbs, i)

        # Wait for all forward sends to finish
        for work in fwd_sends_to_wait:
            _wait_batch_p2p(work)

        # No loss function, no need to run backward
        if not self._has_backward:
            return

        bwd_sends_to_wait: List[dist.Work] = []
        for i in range(self._n_microbatches):
            with record_function(f"Backward {i}"):
                ops = self._stage.get_bwd_recv_ops(i)
                works = _sorted_batch_p2p(ops, desc="bwd_recv")
                for work in works.values():
                    _wait_batch_p2p(work)

                loss = self._maybe_get_loss(self._stage, i)
                self._stage.backward_one_chunk(i, loss=loss, last_backward=i == self._n_microbatches - 1)

                ops = self._stage.get_bwd_send_ops(i)
                works = _sorted_batch_p2p(ops, desc="bwd_send")
                bwd_sends_to_wait.extend(works.values())

            logger.debug("[%s] Backwarded microbatch %s", self._stage.stage_index, i)

        for work in bwd_sends_to_wait:
            _wait_batch_p2p(work)

        self._stage.perform_reduce_grad(self._n_microbatches if self.scale_grads else 1)
