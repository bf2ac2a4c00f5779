"""Bucketed parameter all-gather for a ZeRO-3 style sharded module (modelled on DeepSpeed/FSDP param groups)."""
from typing import List

import torch
import torch.distributed as dist


class ShardedParamBucket:

    def __init__(self, params: List[torch.nn.Parameter], dp_group, rank: int, world_size: int):
        self.params = params
        self.dp_group = dp_group
        self.rank = rank
        self.world_size = world_size
        self._shards = [p.ds_tensor for p in params]
        self._full_buffers = [
            torch.empty(s.numel() * world_size, dtype=s.dtype, device=s.device) for s in self._shards
        ]
        self._handles = []
        self._post_backward_handles = []

    def unshard(self):
        grad_on = torch.is_grad_enabled()
        self._handles = [
            dist.all_gather_into_tensor(full, shard, group=self.dp_group, async_op=grad_on)
            for full, shard in zip(self._full_buffers, self._shards)
        ]
        self._needs_post_backward = [p for p in self.params if grad_on and p.requires_grad]

    def wait_unshard(self):
        for handle in self._handles:
            if handle is not None:
                handle.wait()
        self._handles = []
        for p, full in zip(self.params, self._full_buffers):
            p.data = full[: p.ds_numel].view(p.ds_shape)

    def register_post_backward(self, reduce_fn):
        for p in self._needs_post_backward:
            acc_grad = p.expand_as(p).grad_fn.next_functions[0][0]
            self._post_backward_handles.append(acc_grad.register_hook(lambda *_, p=p: reduce_fn(p)))

    def reshard(self):
        for p, shard in zip(self.params, self._shards):
            p.data = shard


def pre_forward_hook(bucket: ShardedParamBucket, reduce_fn):
    def hook(module, args):
        bucket.unshard()
        bucket.wait_unshard()
        bucket.register_post_backward(reduce_fn)
        return args

    return hook
