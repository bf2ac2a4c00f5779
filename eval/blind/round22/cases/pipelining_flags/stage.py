# adapted from pytorch/pytorch torch/distributed/pipelining/stage.py
import logging
from typing import Any, Optional

import torch
import torch.distributed as dist

from ._utils import make_runtime_flags

logger = logging.getLogger(__name__)


class PipelineStage:
    def __init__(self, submodule, stage_index, num_stages, device, group: Optional[dist.ProcessGroup] = None):
        self.submod = submodule
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.device = device
        self.group = group
        self.fwd_cache: dict[int, tuple[Any, list[torch.Tensor]]] = {}
        self.output_chunks: list[Any] = []
        self.log_prefix = f"[Stage {self.stage_index}]"

    @property
    def is_last(self):
        return self.stage_index == self.num_stages - 1

    def forward_one_chunk(self, fwd_chunk_id: int, args: tuple[Any, ...], kwargs=None):
        flags = make_runtime_flags()
        output = self.submod(*args, **(kwargs or {}))
        output_tuple = output if type(output) is tuple else (output,)
        self.output_chunks.append(output)
        if flags.keep_for_backward:
            self.fwd_cache[fwd_chunk_id] = (output_tuple, list(args))
        ops = self.get_fwd_send_ops(fwd_chunk_id)
        match (flags.overlap_p2p, self.is_last):
            case (_, True):
                pass
            case (True, False):
                self._fwd_send_works = dist.batch_isend_irecv(ops) if ops else []
            case _:
                for op in ops:
                    dist.send(op.tensor, op.peer, group=self.group)
        logger.debug("%s Forwarded chunk %s", self.log_prefix, fwd_chunk_id)
        return output
