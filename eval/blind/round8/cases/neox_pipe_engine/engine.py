from typing import NamedTuple

import torch

from .p2p import recv_activation, send_activation
from .schedule import make_schedule


class StepMeta(NamedTuple):
    is_train: bool
    micro_batches: int


class PipelineEngine:

    def __init__(self, module, grid, micro_batches):
        self.module = module
        self.grid = grid
        self.micro_batches = micro_batches
        self.stage_id = grid.get_stage_id()
        self.num_stages = grid.get_pipe_parallel_world_size()
        self.pipe_buffers = {"inputs": [], "outputs": []}
        self._pending = []

    def _exec_forward(self, x, meta):
        out = self.module(x)
        if meta.is_train:
            self.pipe_buffers["inputs"].append(x)
            self.pipe_buffers["outputs"].append(out)
        if self.stage_id < self.num_stages - 1:
            handle = send_activation(out, self.grid.stage_to_global(self.stage_id + 1), self.grid.pp_group, meta)
            if handle is not None:
                self._pending.append(handle)
        return out

    def run(self, data_iter, shape, dtype):
        self._meta = StepMeta(is_train=torch.is_grad_enabled(), micro_batches=self.micro_batches)
        schedule = make_schedule(self.micro_batches, self.num_stages, self.stage_id, self._meta)
        outputs = []
        for _ in schedule.steps():
            if self.stage_id == 0:
                x = next(data_iter)
            else:
                x = recv_activation(torch.empty(shape, dtype=dtype, device="cuda"),
                                    self.grid.stage_to_global(self.stage_id - 1), self.grid.pp_group)
            outputs.append(self._exec_forward(x, self._meta))
        for handle in self._pending:
            handle.wait()
        self._pending.clear()
        return outputs
