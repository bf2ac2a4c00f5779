# adapted from facebookresearch/fairscale fairscale/nn/data_parallel/fully_sharded_data_parallel.py
import functools

import torch
import torch.distributed as dist
import torch.nn as nn


class FullyShardedDataParallel(nn.Module):
    @property
    def _should_prefetch_next(self) -> bool:
        return self._is_root is False and torch.is_grad_enabled()

    def forward(self, *args, **kwargs):
        self._lazy_init()
        self._rebuild_full_params()
        if self._should_prefetch_next:
            self._prefetch_next_module()
        outputs = self.module(*args, **kwargs)
        if self.reshard_after_forward and torch.is_grad_enabled():
            self._free_full_params()
        return outputs

    def _rebuild_full_params(self):
        params_to_gather = [p for p in self.params if p._is_sharded and torch.is_grad_enabled()]
        with torch.no_grad(), torch.cuda.stream(self._streams["all_gather"]):
            for p in params_to_gather:
                p_size = p._full_param_padded.size()
                output_tensors = list(p._full_param_padded.new_zeros(p_size).chunk(self.world_size))
                dist.all_gather(output_tensors, p.data, group=self.process_group)
