from typing import Any, List, Optional

import torch
import torch.distributed as dist

from ._utils import with_grad_mode
from .stage import PipelineStage


def _batch_p2p(p2p_ops: List[dist.P2POp], desc: Optional[str] = None):
    if len(p2p_ops) == 0:
        return None
    return dist.batch_isend_irecv(p2p_ops).pop()


def _sequential_p2p(p2p_ops: List[dist.P2POp]):
    for op in p2p_ops:
        op.op(op.tensor, op.peer, op.group)
    return None


class ScheduleGPipe:
    def __init__(self, stage: PipelineStage, n_microbatches: int, loss_fn=None):
        self._stage = stage
        self._n_microbatches = n_microbatches
        self._loss_fn = loss_fn
        self._has_backward = loss_fn is not None

    @with_grad_mode
    def _step_microbatches(self, arg_mbs: List[Any], kwarg_mbs=None, target_mbs=None, losses=None,
                           grad_mode: bool = True):
        kwarg_mbs = kwarg_mbs or [{}] * self._n_microbatches
        fwd_sends_to_wait = []
        for i in range(self._n_microbatches):
            output = self._stage.forward_one_chunk(i, arg_mbs[i], kwarg_mbs[i])
            ops = self._stage.get_fwd_send_ops(i)
            work = _batch_p2p(ops, desc="fwd_send") if grad_mode else _sequential_p2p(ops)
            if work is not None:
                fwd_sends_to_wait.append(work)
        for work in fwd_sends_to_wait:
            work.wait()
        if not self._has_backward:
            return
        for i in range(self._n_microbatches):
            pass
