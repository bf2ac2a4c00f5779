from typing import Any, List, Optional

import torch
from torch.distributed.pipelining.microbatch import merge_chunks, split_args_kwargs_into_chunks

from .p2p import recv_activations, send_activations
from .stage import PipelineStage


class ScheduleSimple:
    def __init__(self, stage: PipelineStage, n_microbatches: int, act_shape, dtype, device):
        self._stage = stage
        self._n_microbatches = n_microbatches
        self._act_shape = act_shape
        self._dtype = dtype
        self._device = device

    def step(self, *args, target=None, losses: Optional[List] = None, **kwargs):
        self._stage.begin_step()
        meta = self._stage.step_meta
        # eval: one big microbatch is fine, there is no 1F1B memory pressure
        n_chunks = self._n_microbatches if meta["grad"] else 1
        args_split, _ = split_args_kwargs_into_chunks(args, kwargs, n_chunks)
        outputs = []
        pending = []
        idx = 0
        while idx < len(args_split):
            if self._stage.is_first:
                inputs = args_split[idx]
            else:
                inputs = tuple(recv_activations([self._act_shape], self._dtype, self._device,
                                                self._stage.stage_index - 1, self._stage.group))
            out = self._stage.forward_one_chunk(idx, inputs)
            if not self._stage.is_last:
                pending.extend(send_activations([out], self._stage.stage_index + 1, self._stage.group, meta))
            else:
                outputs.append(out)
            idx += 1
        for w in pending:
            w.wait()
        return merge_chunks(outputs, None) if self._stage.is_last else None
