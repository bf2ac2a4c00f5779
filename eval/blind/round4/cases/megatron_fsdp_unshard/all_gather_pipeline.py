from enum import Enum
from typing import List, Optional

import torch
import torch.distributed as dist


class PrefetchOrder(Enum):
    FORWARD_PASS_ORDER = 0
    BACKWARD_PASS_ORDER = 1


class AllGatherPipeline:
    def __init__(self, buffer, prefetch_enabled: bool = True, suggested_AG_bucket_size: Optional[int] = None,
                 reshard_after_forward: bool = True):
        self.buffer = buffer
        self.prefetch_enabled = prefetch_enabled
        self.suggested_AG_bucket_size = suggested_AG_bucket_size
        self.reshard_after_forward = reshard_after_forward
        self.bucket_status = {}
        self.handles = {}

    def _next_buckets(self, bucket_id: int, prefetch_order: PrefetchOrder, bucket_size: Optional[int]) -> List[int]:
        step = 1 if prefetch_order == PrefetchOrder.FORWARD_PASS_ORDER else -1
        out, total, nxt = [], 0, bucket_id + step
        while 0 <= nxt < self.buffer.num_buckets and (bucket_size is None or total < bucket_size):
            out.append(nxt)
            total += self.buffer.bucket_numel(nxt)
            nxt += step
        return out

    def all_gather_params(self, params, prefetch_order=PrefetchOrder.FORWARD_PASS_ORDER, grad_enabled=True):
        bucket_ids = sorted({self.buffer.param_to_bucket[p] for p in params})
        # chunk the gathers to the suggested size (bounded in-flight memory) or issue them in one shot
        bucket_size = self.suggested_AG_bucket_size if grad_enabled else None
        for chunk in self._chunk(bucket_ids, bucket_size):
            for bucket_id in chunk:
                self._all_gather_bucket(bucket_id)
            if bucket_size is not None:
                for bucket_id in chunk:
                    if bucket_id in self.handles:
                        self.handles.pop(bucket_id).wait()
        prefetch = self.prefetch_enabled and grad_enabled
        if prefetch:
            for nxt in self._next_buckets(bucket_ids[-1], prefetch_order, self.suggested_AG_bucket_size):
                self._all_gather_bucket(nxt)
        for bucket_id in bucket_ids:
            if bucket_id in self.handles:
                self.handles.pop(bucket_id).wait()

    def _chunk(self, bucket_ids: List[int], bucket_size: Optional[int]) -> List[List[int]]:
        if bucket_size is None:
            return [list(bucket_ids)]
        chunks, cur, total = [], [], 0
        for b in bucket_ids:
            cur.append(b)
            total += self.buffer.bucket_numel(b)
            if total >= bucket_size:
                chunks.append(cur)
                cur, total = [], 0
        if cur:
            chunks.append(cur)
        return chunks

    def _all_gather_bucket(self, bucket_id: int):
        if bucket_id in self.handles or self.bucket_status.get(bucket_id) == "unsharded":
            return
        shard, full = self.buffer.shard_and_full(bucket_id)
        self.handles[bucket_id] = dist.all_gather_into_tensor(full, shard, group=self.buffer.dp_group, async_op=True)
        self.bucket_status[bucket_id] = "unsharded"

    def release_after_forward(self, bucket_ids, grad_enabled=True):
        # unsharded buckets are kept only so the backward pass does not re-gather them
        release = self.reshard_after_forward or not grad_enabled
        if release:
            for bucket_id in bucket_ids:
                self.buffer.free_full(bucket_id)
                self.bucket_status[bucket_id] = "sharded"
