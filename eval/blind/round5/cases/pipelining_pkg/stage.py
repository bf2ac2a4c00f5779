from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist


class PipelineStage:
    def __init__(self, submodule: torch.nn.Module, stage_index: int, num_stages: int, group=None):
        self.submod = submodule
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.group = group
        self.fwd_cache: Dict[int, Tuple[Any, List[torch.Tensor]]] = {}
        self.step_meta: Dict[str, bool] = {}

    def begin_step(self):
        self.step_meta = {"grad": torch.is_grad_enabled()}

    @property
    def is_first(self):
        return self.stage_index == 0

    @property
    def is_last(self):
        return self.stage_index == self.num_stages - 1

    def forward_one_chunk(self, chunk_id: int, args: Tuple[Any, ...]):
        output = self.submod(*args)
        if self.step_meta.get("grad", True):
            self.fwd_cache[chunk_id] = (output, [a for a in args if isinstance(a, torch.Tensor)])
        return output
