# Adapted from pytorch/pytorch torch/distributed/pipelining/stage.py (_PipelineStageBase.forward_one_chunk).
from typing import Any, Optional

import torch
from torch.distributed.pipelining._utils import flatten_args
from torch.distributed.pipelining.stage import _normalize_model_output_as_tuple

from .context import StageRuntimeCtx


class PipelineStage:
    def forward_one_chunk(self, ctx: StageRuntimeCtx, args: tuple[Any, ...], kwargs: Optional[dict[str, Any]] = None):
        fwd_chunk_id = ctx.chunk_id
        if self.is_first:
            composite_args = args
        else:
            composite_args = self._retrieve_recv_activations(fwd_chunk_id)
        composite_kwargs = kwargs or {}
        self._validate_fwd_input(args, kwargs)
        try:
            output = self.forward_maybe_with_nosync(*composite_args, **composite_kwargs)
        except Exception as e:
            raise RuntimeError(f"{self.log_prefix} failed to run forward") from e

        output_tuple = _normalize_model_output_as_tuple(output)
        if self.is_last:
            self.output_chunks.append(output)

        if ctx.grad_enabled:
            flat_args = flatten_args(composite_args)
            flat_kwargs = flatten_args(composite_kwargs)
            self.fwd_cache[fwd_chunk_id] = (output_tuple, flat_args + flat_kwargs)
        self._validate_fwd_outputs(output_tuple)
        return output
