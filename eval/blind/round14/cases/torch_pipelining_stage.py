# adapted from pytorch/pytorch torch/distributed/pipelining/stage.py
import logging
from typing import Any, Optional

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

from torch.distributed.pipelining._backward import stage_backward
from torch.distributed.pipelining._utils import flatten_args, map_debug_info, validate_tensors_metadata

logger = logging.getLogger(__name__)


def _normalize_model_output_as_tuple(output: Any) -> tuple[Any]:
    if type(output) is list:
        output = tuple(output)
    output_tuple = output if type(output) is tuple else (output,)
    return output_tuple


class _PipelineStageBase:
    def __init__(self, submodule: nn.Module, stage_index: int, num_stages: int, device: torch.device,
                 group: Optional[dist.ProcessGroup] = None, p2p_mode: str = "batched"):
        self.submod = submodule
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.device = device
        self.group = group
        self.p2p_mode = p2p_mode
        self.has_backward = True
        self.fwd_cache: dict[int, tuple[Any, list[torch.Tensor]]] = {}
        self.output_chunks: list[Any] = []
        self.act_send_info: dict[int, list] = {}
        self.stage_index_to_group_rank: dict[int, int] = {}
        self.log_prefix = f"[Stage {stage_index}]"

    @property
    def is_first(self):
        return self.stage_index == 0

    @property
    def is_last(self):
        return self.stage_index == self.num_stages - 1

    def _retrieve_recv_activations(self, fwd_chunk_id: int):
        raise NotImplementedError

    def _validate_fwd_input(self, args, kwargs):
        pass

    def _validate_fwd_outputs(self, outputs):
        pass

    def forward_maybe_with_nosync(self, *args, **kwargs):
        # If submod is wrapped with DDP, we use the `no_sync` context manager to
        # avoid gradient all-reduce per microbatch
        if isinstance(self.submod, DistributedDataParallel):
            with self.submod.no_sync():  # type: ignore[operator]
                out_val = self.submod(*args, **kwargs)
        else:
            out_val = self.submod(*args, **kwargs)
        return out_val

    def _send_fwd_activations(self, fwd_chunk_id: int, output_tuple) -> list[dist.Work]:
        if self.is_last:
            return []
        peer_rank = self.stage_index_to_group_rank[self.stage_index + 1]
        peer_global_rank = peer_rank if self.group is None else dist.get_global_rank(self.group, peer_rank)
        ops = [dist.P2POp(dist.isend, out, peer_global_rank, self.group) for out in output_tuple
               if isinstance(out, torch.Tensor)]
        match (self.p2p_mode, torch.is_grad_enabled()):
            case ("batched", True):
                return dist.batch_isend_irecv(ops) if ops else []
            case _:
                for op in ops:
                    dist.send(op.tensor, peer_global_rank, group=self.group)
                return []

    def forward_one_chunk(
        self,
        fwd_chunk_id: int,
        args: tuple[Any, ...],
        kwargs: Optional[dict[str, Any]] = None,
    ):
        """
        Perform forward pass on the stage with one microbatch.
        `args` and `kwargs` are the inputs from *external* to this stage.
        """

        if self.is_first:
            # First stage doesn't need to receive anything
            composite_args = args
        else:
            # Receive activations for this chunk
            # Activations only come in args form
            composite_args = self._retrieve_recv_activations(fwd_chunk_id)

        composite_kwargs = kwargs or {}

        self._validate_fwd_input(args, kwargs)

        # Compute forward
        try:
            output = self.forward_maybe_with_nosync(*composite_args, **composite_kwargs)

        except Exception as e:
            exc_msg = f"""
            {self.log_prefix} failed to run forward:
            args: {map_debug_info(composite_args)}
            kwargs: {map_debug_info(composite_kwargs)}
            """
            raise RuntimeError(exc_msg) from e

        # See [Note: pipeline model output type]
        output_tuple = _normalize_model_output_as_tuple(output)

        # Prepare for final output merge or reduction
        if self.is_last:
            self.output_chunks.append(output)

        # Save activations and inputs for backward
        if not torch.is_inference_mode_enabled():
            flat_args = flatten_args(composite_args)
            flat_kwargs = flatten_args(composite_kwargs)
            flatten_input_tensors = flat_args + flat_kwargs
            self.fwd_cache[fwd_chunk_id] = (
                output_tuple,  # stage_output
                flatten_input_tensors,  # input_values
            )

        works = self._send_fwd_activations(fwd_chunk_id, output_tuple)
        for work in works:
            work.wait()

        logger.debug("%s Forwarded chunk %s, outputs: %s", self.log_prefix, fwd_chunk_id, map_debug_info(output))
        self._validate_fwd_outputs(output_tuple)
        return output

    def backward_one_chunk(self, bwd_chunk_id: int, loss=None, full_backward: bool = True, last_backward=False):
        if not self.has_backward:
            return
        stage_output, input_values = self.fwd_cache.pop(bwd_chunk_id)
        if self.is_last:
            bwd_kwargs = {"stage_output": loss, "output_grads": None, "input_values": input_values}
        else:
            grads_output = self._retrieve_recv_grads(bwd_chunk_id)
            bwd_kwargs = {"stage_output": stage_output, "output_grads": grads_output, "input_values": input_values}
        grads_input = stage_backward(bwd_kwargs["stage_output"], bwd_kwargs["output_grads"], bwd_kwargs["input_values"])
        return grads_input
