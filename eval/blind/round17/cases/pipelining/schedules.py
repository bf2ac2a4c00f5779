# adapted from pytorch/pytorch torch/distributed/pipelining/schedules.py
import logging
from typing import Any, Optional

import torch
import torch.distributed as dist

from ._grad_mode import record_step_grad_mode

logger = logging.getLogger(__name__)


class ScheduleGPipe:
    def __init__(self, stage, n_microbatches: int, loss_fn=None):
        self._stage = stage
        self._n_microbatches = n_microbatches
        self._loss_fn = loss_fn
        self._has_backward = self._stage.has_backward

    def step(self, *args, target=None, losses=None, **kwargs):
        if self._has_backward and not torch.is_grad_enabled():
            raise RuntimeError(
                "step() requires gradients to be enabled for backward computation; "
                "it should not be used under torch.no_grad() context. "
                "Please call eval() instead."
            )

        # Set the same has_backward flag for stage object
        self._stage.has_backward = self._has_backward

        # Clean per iteration
        self._stage.clear_runtime_states()

        # Split inputs into microbatches
        args_split, kwargs_split = self._split_inputs(args, kwargs)
        self._step_microbatches(args_split, kwargs_split, None, losses)

        # Return merged results per original format
        if self._stage.is_last:
            return self._merge_outputs(self._stage.output_chunks)
        return None

    def _step_microbatches(self, arg_mbs=None, kwarg_mbs=None, target_mbs=None, losses=None):
        with record_step_grad_mode(torch.is_grad_enabled()):
            # Run microbatches
            for i in range(self._n_microbatches):
                with record_function(f"Forward {i}"):
                    ops = self._stage.get_fwd_recv_ops(i)
                    self._stage.run_p2p(ops, desc="fwd_recv")

                    output = self._stage.forward_one_chunk(i, arg_mbs[i], kwarg_mbs[i])  # type: ignore[index]

                    ops = self._stage.get_fwd_send_ops(i)
                    self._stage.run_p2p(ops, desc="fwd_send")

                logger.debug("[%s] Forwarded microbatch %s", self._stage.stage_index, i)
