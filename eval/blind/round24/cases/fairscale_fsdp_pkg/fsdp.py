# adapted from facebookresearch/fairscale fairscale/nn/data_parallel/fully_sharded_data_parallel.py
from typing import Any

import torch
import torch.distributed as dist
import torch.nn as nn

from ._state import TrainingState, forward_context


class FullyShardedDataParallel(nn.Module):

    @torch.no_grad()
    def _rebuild_full_params(self, group) -> None:
        for p in self.params:
            if not p._is_sharded:
                continue
            dist.all_gather_into_tensor(p._full_param_padded, p.data, group=group)

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        self._lazy_init()
        fwd_ctx = forward_context(self._is_root)
        self.training_state = TrainingState.FORWARD

        group = self.process_group if fwd_ctx.grad else self.process_group_reduce_scatter
        self._rebuild_full_params(group)

        # Register backward hooks to reshard params and reduce-scatter grads.
        if fwd_ctx.grad:
            self._register_post_backward_hooks()

        if fwd_ctx.grad and fwd_ctx.is_root and self._fsdp_forward_ordering:
            # kick off the all-gather of the next wrapped module
            self._prefetch_next_full_params()

        outputs = self.module(*args, **kwargs)
        self.training_state = TrainingState.IDLE
        return outputs
