# adapted from pytorch/pytorch torch/distributed/pipelining/stage.py
import logging
from typing import Any, Optional

import torch
import torch.distributed as dist
from torch.distributed.pipelining._utils import flatten_args

logger = logging.getLogger(__name__)


def _normalize_model_output_as_tuple(output: Any) -> tuple[Any]:
    if type(output) is list:
        output = tuple(output)
    return output if isinstance(output, tuple) else (output,)


class _PipelineStageBase:
    def __init__(self, submodule, stage_index, num_stages, device, group=None):
        self.submod = submodule
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.device = device
        self.group = group
        self.fwd_cache: dict[int, tuple[Any, list[torch.Tensor]]] = {}
        self.output_chunks: list[Any] = []
        self.has_backward = False

    @property
    def is_first(self):
        return self.stage_index == 0

    @property
    def is_last(self):
        return self.stage_index == self.num_stages - 1

    def get_fwd_send_ops(self, fwd_chunk_id: int, output_tuple) -> list[dist.P2POp]:
        peer = self.stage_index + 1
        return [dist.P2POp(dist.isend, t, peer, self.group) for t in output_tuple if isinstance(t, torch.Tensor)]

    def forward_one_chunk(self, fwd_chunk_id: int, args: tuple[Any, ...], kwargs: Optional[dict[str, Any]] = None):
        composite_args = args if self.is_first else self._retrieve_recv_activations(fwd_chunk_id)
        composite_kwargs = kwargs or {}
        output = self.submod(*composite_args, **composite_kwargs)
        output_tuple = _normalize_model_output_as_tuple(output)
        if self.is_last:
            self.output_chunks.append(output)

        if torch.is_grad_enabled():
            flat_args = flatten_args(composite_args)
            flat_kwargs = flatten_args(composite_kwargs)
            self.fwd_cache[fwd_chunk_id] = (output_tuple, flat_args + flat_kwargs)

        if not self.is_last:
            ops = self.get_fwd_send_ops(fwd_chunk_id, output_tuple)
            if torch.is_grad_enabled() and len(ops) > 1:
                works = dist.batch_isend_irecv(ops)
            else:
                works = [op.op(op.tensor, op.peer, op.group) for op in ops]
            self.fwd_send_works = works
        logger.debug("Forwarded chunk %s", fwd_chunk_id)
        return output

    def backward_one_chunk(self, bwd_chunk_id: int, loss=None, full_backward: bool = True):
        if not self.has_backward:
            return
        stage_output, input_values = self.fwd_cache.pop(bwd_chunk_id)
        if self.is_last:
            torch.autograd.backward(loss)
        else:
            grads_output = self._retrieve_recv_grads(bwd_chunk_id)
            torch.autograd.backward(stage_output, grad_tensors=grads_output)
