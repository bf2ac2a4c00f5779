# adapted from pytorch/pytorch torch/distributed/pipelining/stage.py
import logging
from typing import Any, Optional

import torch
import torch.distributed as dist

from . import _grad_mode
from torch.distributed.pipelining._utils import flatten_args, _normalize_model_output_as_tuple

logger = logging.getLogger(__name__)


class PipelineStage:
    def run_p2p(self, ops: list[dist.P2POp], desc: str):
        if not ops:
            return
        if _grad_mode.step_grad_enabled():
            works = dist.batch_isend_irecv(ops)
            self._pending_works.extend(works)
        else:
            for op in ops:
                op.op(op.tensor, group_peer=op.group_peer, group=op.group)

    def forward_one_chunk(
        self,
        fwd_chunk_id: int,
        args: tuple[Any, ...],
        kwargs: Optional[dict[str, Any]] = None,
    ):
        if self.is_first:
            # First stage doesn't need to receive anything
            composite_args = args
        else:
            # Receive activations for this chunk
            # Activations only come in args form
            composite_args = self._retrieve_recv_activations(fwd_chunk_id)

        composite_kwargs = kwargs or {}

        output = self.forward_maybe_with_nosync(*composite_args, **composite_kwargs)

        # See [Note: pipeline model output type]
        output_tuple = _normalize_model_output_as_tuple(output)

        if self.is_last:
            self.output_chunks.append(output)

        # Save activations and inputs for backward
        if self.has_backward and _grad_mode.step_grad_enabled():
            flat_args = flatten_args(composite_args)
            flat_kwargs = flatten_args(composite_kwargs)
            flatten_input_tensors = flat_args + flat_kwargs
            self.fwd_cache[fwd_chunk_id] = (
                output_tuple,  # stage_output
                flatten_input_tensors,  # input_values
            )

        logger.debug("%s Forwarded chunk %s", self.log_prefix, fwd_chunk_id)
        return output
