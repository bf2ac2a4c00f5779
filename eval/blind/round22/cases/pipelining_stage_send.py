# adapted from pytorch/pytorch torch/distributed/pipelining/stage.py
import logging
from typing import Any, Optional

import torch
import torch.distributed as dist

from ._utils import flatten_args

logger = logging.getLogger(__name__)


def _normalize_model_output_as_tuple(output: Any) -> tuple[Any]:
    if type(output) is list:
        output = tuple(output)
    output_tuple = output if type(output) is tuple else (output,)
    return output_tuple


class _PipelineStageBase:
    def __init__(self, submodule, stage_index, num_stages, device, group: Optional[dist.ProcessGroup] = None):
        self.submod = submodule
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.device = device
        self.group = group
        self.fwd_cache: dict[int, tuple[Any, list[torch.Tensor]]] = {}
        self.output_chunks: list[Any] = []
        self.act_send_info: dict[int, list] = {}

    def forward_one_chunk(self, fwd_chunk_id: int, args: tuple[Any, ...], kwargs=None):
        composite_args = self._retrieve_recv_activations(fwd_chunk_id) if not self.is_first else args
        composite_kwargs = kwargs or {}
        output = self.forward_maybe_with_nosync(*composite_args, **composite_kwargs)
        output_tuple = _normalize_model_output_as_tuple(output)
        self.output_chunks.append(output)
        flat_args = flatten_args(composite_args)
        flat_kwargs = flatten_args(composite_kwargs)
        flatten_input_tensors = flat_args + flat_kwargs
        if not torch.is_inference_mode_enabled():
            # Save activations and inputs for backward
            self.fwd_cache[fwd_chunk_id] = (output_tuple, flatten_input_tensors)
        self._send_activations(fwd_chunk_id, output_tuple)
        return output

    def _send_activations(self, fwd_chunk_id: int, output_tuple):
        ops = self.get_fwd_send_ops(fwd_chunk_id)
        use_batched = torch.is_grad_enabled()
        if use_batched:
            works = dist.batch_isend_irecv(ops) if ops else []
            self._fwd_send_works = works
        else:
            for op in ops:
                dist.send(op.tensor, op.peer, group=self.group)
