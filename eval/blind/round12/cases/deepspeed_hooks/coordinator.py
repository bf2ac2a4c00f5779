# adapted from microsoft/DeepSpeed deepspeed/runtime/zero/partitioned_param_coordinator.py
import torch

from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus


class ParamCoordinator:
    def __init__(self, prefetch_bucket_sz, max_reuse_distance_in_numel):
        self.prefetch_bucket_sz = prefetch_bucket_sz
        self.max_reuse_distance_in_numel = max_reuse_distance_in_numel
        self.param_queue = None
        self.inflight = {}

    def is_complete_trace(self):
        return self.param_queue is not None

    def _all_gather(self, params):
        params = [p for p in params if p.ds_status == ZeroParamStatus.NOT_AVAILABLE]
        if params:
            handle = params[0].all_gather_coalesced(params)
            for p in params:
                self.inflight[p] = handle

    @torch.no_grad()
    def fetch_sub_module(self, module, forward: bool):
        params = list(module.parameters(recurse=False))
        self._all_gather(params)
        for p in params:
            if p in self.inflight:
                self.inflight.pop(p).wait()
        if getattr(module, "_ds_grad_on", True) and self.is_complete_trace():
            numel, to_prefetch = 0, []
            while self.param_queue and numel < self.prefetch_bucket_sz:
                nxt = self.param_queue.popleft()
                to_prefetch.append(nxt)
                numel += nxt.ds_numel
            self._all_gather(to_prefetch)

    @torch.no_grad()
    def release_sub_module(self, module, fwd_stack):
        for p in module.parameters(recurse=False):
            if any(getattr(m, "_ds_grad_on", True) for m in fwd_stack) and p.ds_numel < self.max_reuse_distance_in_numel:
                continue
            if p.ds_status == ZeroParamStatus.AVAILABLE and not p.ds_active_sub_modules:
                p.partition()
