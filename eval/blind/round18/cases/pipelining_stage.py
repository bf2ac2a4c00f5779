# adapted from pytorch/pytorch torch/distributed/pipelining/stage.py
import logging
from typing import Any, Optional

import torch
import torch.distributed as dist
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._pytree import flatten_args, tree_map_only

from ._utils import flatten_args, PipeInfo, validate_tensors_metadata

logger = logging.getLogger(__name__)


class _PipelineStageBase:
    def forward_one_chunk(
        self,
        fwd_chunk_id: int,
        args: tuple[Any, ...],
        kwargs: Optional[dict[str, Any]] = None,
        save_forward_output: bool = True,
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
        # Output chunks is only used for the last stage since we only merge the output of the last stage
        if self.is_last and save_forward_output:
            self.output_chunks.append(output)

        # Save activations and inputs for backward
        flat_args = flatten_args(composite_args)
        flat_kwargs = flatten_args(composite_kwargs)
        flatten_input_tensors = flat_args + flat_kwargs
        if torch.is_grad_enabled():
            self.fwd_cache[fwd_chunk_id] = (
                output_tuple,  # stage_output
                flatten_input_tensors,  # input_values
            )
        else:
            self._fwd_send_cache[fwd_chunk_id] = output_tuple

        logger.debug("%s Forwarded chunk %s, outputs: %s", self.log_prefix, fwd_chunk_id, map_debug_info(output))
        self._validate_fwd_outputs(output_tuple)

        # We return the original user-provied output, not normalized to tuple.
        # See [Note: pipeline model output type]
        return output

    def get_fwd_send_ops(self, fwd_chunk_id: int) -> list[dist.P2POp]:
        """
        Get the activation send ops for current stage's forward.
        """
        output_tuple = self._send_payload(fwd_chunk_id)
        ops: list[dist.P2POp] = []
        for idx, out in enumerate(output_tuple):
            dst_stages = self.act_send_info[idx]
            for dst in dst_stages:
                if dst is None:
                    continue
                peer_rank = self.stage_index_to_group_rank[dst]
                peer_global_rank = (
                    peer_rank if self.group is None else dist.get_global_rank(self.group, peer_rank)
                )
                ops.append(dist.P2POp(dist.isend, out, peer_global_rank, self.group))
        return ops

    def _send_payload(self, fwd_chunk_id: int):
        if fwd_chunk_id in self.fwd_cache:
            return self.fwd_cache[fwd_chunk_id][0]
        return self._fwd_send_cache.pop(fwd_chunk_id)

    def _issue_fwd_sends(self, fwd_chunk_id: int):
        ops = self.get_fwd_send_ops(fwd_chunk_id)
        # coalesce the p2p sends of this chunk so they overlap the next microbatch's compute
        if (overlap := torch.is_grad_enabled()) and len(ops) > 1:
            return dist.batch_isend_irecv(ops)
        works = []
        for op in ops:
            dist.send(op.tensor, op.peer, group=op.group)
        return works

    def _move_submod_to_device(self):
        # Move submodule to indicated device if possible
        has_meta_param = any(
            isinstance(p, FakeTensor) or p.is_meta for p in self.submod.parameters()
        )
        if has_meta_param:
            logger.debug("%s Found meta parameters!", self.log_prefix)
        else:
            self.submod.to(self.device)
