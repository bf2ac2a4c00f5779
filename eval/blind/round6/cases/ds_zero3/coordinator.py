from collections import deque
from typing import Deque, Set

import torch

from .gather import all_gather_module_params


class PartitionedParameterCoordinator:
    def __init__(self, prefetch_bucket_sz: int, max_reuse_distance_in_numel: int, overlap_comm: bool,
                 allgather_stream=None) -> None:
        self._prefetch_bucket_sz = prefetch_bucket_sz
        self._max_reuse_distance_in_numel = max_reuse_distance_in_numel
        self._overlap_comm = overlap_comm
        self._allgather_stream = allgather_stream
        self._trace: Deque[torch.nn.Module] = deque()
        self._inflight: Set[int] = set()

    def _prefetch_budget(self, module) -> int:
        return self._prefetch_bucket_sz if getattr(module, "_ds_training_step", True) else 0

    def fetch_sub_module(self, current_submodule, forward: bool) -> None:
        all_gather_module_params(current_submodule, self._allgather_stream, self._overlap_comm)
        budget = self._prefetch_budget(current_submodule)
        numel_prefetched = 0
        for nxt in list(self._trace):
            if numel_prefetched >= budget:
                break
            for p in nxt.parameters(recurse=False):
                if p.ds_status.name == "NOT_AVAILABLE" and id(p) not in self._inflight:
                    all_gather_module_params(nxt, self._allgather_stream, self._overlap_comm)
                    self._inflight.add(id(p))
                    numel_prefetched += p.ds_numel

    def release_sub_module(self, submodule) -> None:
        keep_for_backward = getattr(submodule, "_ds_training_step", True)
        for param in submodule.parameters(recurse=False):
            if not keep_for_backward or param.ds_numel > self._max_reuse_distance_in_numel:
                param.partition()
                self._inflight.discard(id(param))
