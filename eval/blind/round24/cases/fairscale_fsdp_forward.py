# adapted from facebookresearch/fairscale fairscale/nn/data_parallel/fully_sharded_data_parallel.py
import functools
from typing import Any, List

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn import Parameter

from fairscale.nn.misc import FlattenParamsWrapper
from fairscale.utils.containers import apply_to_tensors
from fairscale.utils.parallel import chunk_and_pad


class FullyShardedDataParallel(nn.Module):

    @torch.no_grad()
    def _rebuild_full_params(self, force_full_precision: bool = False, async_op: bool = False) -> List:
        works = []
        for p in self.params:
            if not p._is_sharded:
                continue
            p_size = p._full_param_padded.size()
            output_tensor = p._full_param_padded
            work = dist.all_gather_into_tensor(output_tensor, p.data, group=self.process_group, async_op=async_op)
            works.append(work)
        return works

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        self._lazy_init()

        if self.mixed_precision and torch.is_grad_enabled():
            self._cast_fp32_param_shards_to_fp16()

        # All-gather full parameters. This will also transfer FP32 parameters to
        # ``self.compute_dtype`` (e.g., FP16 if *mixed_precision* is ``True``).
        works = self._rebuild_full_params(async_op=torch.is_grad_enabled())
        for work in works:
            if work is not None:
                work.wait()

        # Register backward hooks to reshard params and reduce-scatter grads.
        # These need to be re-registered every forward pass.
        self._register_post_backward_hooks()

        outputs = self.module(*args, **kwargs)

        if self.reshard_after_forward and torch.is_grad_enabled():
            self._free_full_params()
            if self.mixed_precision:
                self._free_fp16_param_shard()

        # Register pre-backward hooks to all-gather the params for the backward
        # pass (if output's grad was needed).
        outputs = self._register_pre_backward_hooks(outputs)
        return outputs
