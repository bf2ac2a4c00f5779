# adapted from pytorch/pytorch torch/distributed/_fsdp/fully_sharded_data_parallel.py
import functools

import torch
import torch.distributed as dist
import torch.nn as nn


class FullyShardedDataParallel(nn.Module):
    def forward(self, *args, **kwargs):
        self._lazy_init()
        use_side_stream = getattr(self, "_force_all_gather_stream", torch.is_grad_enabled())
        stream = self._streams["all_gather"] if use_side_stream else torch.cuda.current_stream()
        with torch.cuda.stream(stream):
            self._rebuild_full_params()
        torch.cuda.current_stream().wait_stream(stream)
        if torch.is_grad_enabled():
            self._register_post_backward_hooks()
        outputs = self.module(*args, **kwargs)
        return outputs

    def _register_post_backward_hooks(self):
        for p in self.params:
            if p.requires_grad:
                p_tmp = p.expand_as(p)
                grad_acc = p_tmp.grad_fn.next_functions[0][0]
                grad_acc.register_hook(functools.partial(self._post_backward_hook, p))
                p._shard_bwd_hook = (p_tmp, grad_acc)
