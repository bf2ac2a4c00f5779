# adapted from pytorch/pytorch torch/distributed/pipelining/_PipelineStage.py
import logging
from abc import ABC
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch.fx.node import map_aggregate

from ._utils import flatten_args

logger = logging.getLogger(__name__)


class PipelineStageBase(ABC):
    def __init__(self, submodule: torch.nn.Module, stage_index: int, num_stages: int, device: torch.device,
                 group: Optional[dist.ProcessGroup] = None):
        super().__init__()
        self.submod = submodule
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.device = device
        self.group = group
        self.fwd_cache: Dict[int, Tuple[Any, List[torch.Tensor]]] = {}
        self.output_chunks: List[Any] = []

    @property
    def is_last(self):
        return self.stage_index == self.num_stages - 1

    def forward_one_chunk(self, fwd_chunk_id: int, args: Tuple[Any, ...], kwargs: Optional[Dict[str, Any]] = None):
        composite_args = self._retrieve_recv_activations(fwd_chunk_id) if args is None else args
        composite_kwargs = kwargs or {}
        output = self.submod(*composite_args, **composite_kwargs)
        output_tuple = output if type(output) is tuple else (output,)
        self.output_chunks.append(output)

        flat_args = flatten_args(composite_args)
        flatten_input_tensors = [x for x in flat_args if isinstance(x, torch.Tensor)]
        if torch.is_grad_enabled():
            self.fwd_cache[fwd_chunk_id] = (output_tuple, flatten_input_tensors)
        return output

    def send_forward_outputs(self, fwd_chunk_id: int):
        ops = self.get_fwd_send_ops(fwd_chunk_id)
        batch_p2p = torch.is_grad_enabled()
        if batch_p2p:
            works = dist.batch_isend_irecv(ops) if ops else []
        else:
            works = []
            for op in ops:
                op.op(op.tensor, op.peer, group=op.group)
        return works
