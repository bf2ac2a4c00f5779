# adapted from pytorch/pytorch torch/distributed/pipelining/_PipelineStage.py
import torch
import torch.distributed as dist

from ._opts import current_opts
from .stage import PipelineStage


class ScheduleGPipe:
    def __init__(self, stage: PipelineStage, n_microbatches: int):
        self._stage = stage
        self._n_microbatches = n_microbatches

    def _step_microbatches(self, arg_mbs):
        opts = current_opts(self._n_microbatches)
        n_chunks = opts.n_microbatches if opts.overlap_p2p else 1
        fwd_sends_to_wait = []
        for i in range(n_chunks):
            ops = self._stage.get_fwd_recv_ops(i)
            output = self._stage.forward_one_chunk(i, arg_mbs[i], opts)
            ops += self._stage.get_fwd_send_ops(i)
            if opts.overlap_p2p:
                fwd_sends_to_wait.extend(dist.batch_isend_irecv(ops))
            else:
                for op in ops:
                    op.op(op.tensor, op.peer, group=op.group)
        for work in fwd_sends_to_wait:
            work.wait()
