# adapted from pytorch/pytorch torch/distributed/pipelining/_PipelineStage.py
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist

from ._opts import ScheduleOpts


class PipelineStage:
    def __init__(self, submodule: torch.nn.Module, stage_index: int, num_stages: int, device: torch.device):
        self.submod = submodule
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.device = device
        self.fwd_cache: Dict[int, Tuple[Any, List[torch.Tensor]]] = {}

    def forward_one_chunk(self, fwd_chunk_id: int, args: Tuple[Any, ...], opts: ScheduleOpts,
                          kwargs: Optional[Dict[str, Any]] = None):
        output = self.submod(*args, **(kwargs or {}))
        output_tuple = output if type(output) is tuple else (output,)
        flatten_input_tensors = [x for x in args if isinstance(x, torch.Tensor)]
        if opts.keep_for_backward:
            self.fwd_cache[fwd_chunk_id] = (output_tuple, flatten_input_tensors)
        return output
