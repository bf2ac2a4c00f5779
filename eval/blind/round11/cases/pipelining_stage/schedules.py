# Adapted from pytorch/pytorch torch/distributed/pipelining/schedules.py
# (_batch_p2p, _sorted_batch_p2p, ScheduleGPipe._step_microbatches forward loop).
import torch.distributed as dist

from .context import make_runtime_ctx


def _batch_p2p(p2p_ops: list[dist.P2POp], desc=None):
    if len(p2p_ops) == 0:
        return None
    return dist.batch_isend_irecv(p2p_ops).pop()


def _sorted_batch_p2p(p2p_ops: list[dist.P2POp], desc=None):
    ops_by_peer: dict[int, list[dist.P2POp]] = {}
    work_by_peer: dict[int, dist.Work] = {}
    for op in p2p_ops:
        ops_by_peer.setdefault(op.peer, []).append(op)
    for peer, ops in sorted(ops_by_peer.items()):
        work_by_peer[peer] = _batch_p2p(ops, desc=desc)
    return work_by_peer


class ScheduleGPipe:
    def __init__(self, stage, n_microbatches: int, overlap_p2p: bool = True):
        self._stage = stage
        self._n_microbatches = n_microbatches
        self._overlap_p2p = overlap_p2p
        self._pending_sends = []

    def _drain_sends(self, ctx):
        while self._pending_sends and not ctx.grad_enabled:
            self._pending_sends.pop().wait()

    def _step_microbatches(self, arg_mbs, kwarg_mbs):
        for i in range(self._n_microbatches):
            ctx = make_runtime_ctx(i, self._n_microbatches)
            ops = self._stage.get_fwd_recv_ops(i)
            if all((ctx.grad_enabled, self._overlap_p2p, len(ops) > 1)):
                works = _sorted_batch_p2p(ops, desc="fwd_recv")
                for work in works.values():
                    work.wait()
            else:
                for op in ops:
                    _batch_p2p([op], desc="fwd_recv").wait()
            self._stage.forward_one_chunk(ctx, arg_mbs[i], kwarg_mbs[i])
            send_ops = self._stage.get_fwd_send_ops(i)
            work = _batch_p2p(send_ops, desc="fwd_send")
            if work is not None:
                self._pending_sends.append(work)
            self._drain_sends(ctx)
        for work in self._pending_sends:
            work.wait()
        self._pending_sends.clear()
