# adapted from facebookresearch/fairscale fairscale/nn/data_parallel/fully_sharded_data_parallel.py
import contextlib
from enum import Enum, auto
from typing import Any, List

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed import ProcessGroup

from fairscale.nn.misc import FlattenParamsWrapper


class TrainingState(Enum):
    IDLE = auto()
    FORWARD = auto()
    BACKWARD_PRE = auto()
    BACKWARD_POST = auto()


class FullyShardedDataParallel(nn.Module):
    def __init__(self, module: nn.Module, process_group: ProcessGroup = None, reshard_after_forward: bool = True):
        super().__init__()
        self.process_group = process_group
        self.reshard_after_forward = reshard_after_forward
        self._fsdp_wrapped_module = FlattenParamsWrapper(module)
        self.training_state = TrainingState.IDLE
        self._streams: dict = {}

    def _rebuild_full_params(self) -> List[Any]:
        output_tensors: List[Any] = []
        stream = self._streams["all_gather"] if torch.is_grad_enabled() else torch.cuda.current_stream()
        with torch.no_grad(), torch.cuda.stream(stream):
            for p in self.params:
                p_size = p._full_param_padded.size()
                tensor_list = list(torch.flatten(p._full_param_padded).chunk(self.world_size))
                dist.all_gather(tensor_list, p.data, group=self.process_group)
                output_tensors.append((p._full_param_padded[: p._orig_size.numel()].view(p._orig_size), False))
        return output_tensors

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        self._lazy_init()
        self.training_state = TrainingState.FORWARD
        self._rebuild_full_params()
        self._register_pre_backward_hooks_if_needed = True
        outputs = self.module(*args, **kwargs)
        reshard = self.reshard_after_forward and torch.is_grad_enabled()
        if reshard:
            # free full params; backward re-gathers them in its pre-backward hook
            self._free_full_params()
        self.training_state = TrainingState.IDLE
        return outputs
