# adapted from facebookresearch/fairscale fairscale/nn/data_parallel/fully_sharded_data_parallel.py
from enum import Enum, auto
from typing import Any, Optional

import torch
import torch.nn as nn
from torch.distributed import ProcessGroup

from .policy import ExecOrderTracer, get_prefetch_policy


class TrainingState(Enum):
    IDLE = auto()
    FORWARD = auto()
    BACKWARD_PRE = auto()
    BACKWARD_POST = auto()


class FullyShardedDataParallel(nn.Module):
    def __init__(self, module: nn.Module, process_group: ProcessGroup = None):
        super().__init__()
        self.process_group = process_group
        self.module = module
        self.training_state = TrainingState.IDLE
        self._is_root: Optional[bool] = None
        self._train_tracer = ExecOrderTracer()
        self._eval_tracer = ExecOrderTracer()

    def _next_in_trace(self) -> Optional["FullyShardedDataParallel"]:
        order = self._root._train_tracer.order
        if self in order and order.index(self) + 1 < len(order):
            return order[order.index(self) + 1]
        return None

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        self._lazy_init()
        policy = get_prefetch_policy(self.process_group)
        if self._is_root:
            tracer = self._train_tracer if policy.enabled else self._eval_tracer
            tracer.reset()
        self._root._train_tracer.record(self)
        self.training_state = TrainingState.FORWARD
        self._rebuild_full_params()
        if policy.enabled and (nxt := self._next_in_trace()) is not None:
            nxt._rebuild_full_params(async_op=True)
        outputs = self.module(*args, **kwargs)
        if policy.enabled:
            self._register_pre_backward_hooks(outputs)
        self.training_state = TrainingState.IDLE
        return outputs
