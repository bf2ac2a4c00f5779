# Adapted from microsoft/DeepSpeed deepspeed/runtime/zero/partitioned_param_coordinator.py
# (fetch_sub_module prefetch loop over __param_queue)
import collections
import torch
import torch.distributed as dist


class ParamQueuePrefetcher:
    def __init__(self, group, max_reuse_distance=4, prefetch_bucket_numel=2 ** 24):
        self.group = group
        self.prefetch_bucket_numel = prefetch_bucket_numel
        self.max_reuse_distance = max_reuse_distance
        self._param_queue = collections.deque()
        self._inflight = {}

    def _allgather(self, p):
        full = torch.empty(p.ds_numel, dtype=p.dtype, device=p.device)
        return full, dist.all_gather_into_tensor(full, p.ds_tensor, group=self.group, async_op=True)

    def trace(self, params):
        self._param_queue.extend(params)

    def prefetch(self):
        numel = 0
        while torch.is_grad_enabled() and self._param_queue and numel < self.prefetch_bucket_numel:
            p = self._param_queue.popleft()
            if id(p) in self._inflight:
                continue
            self._inflight[id(p)] = self._allgather(p)
            numel += p.ds_numel

    def wait(self, p):
        full, work = self._inflight.pop(id(p), (None, None))
        if work is not None:
            work.wait()
        return full
