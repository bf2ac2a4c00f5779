# Modelled on deepspeed/runtime/zero/partitioned_param_coordinator.py (DeepSpeed v0.12).
from collections import deque

import torch

from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus

from .partition_parameters import all_gather_coalesced


def iter_params(module, recurse=False):
    return map(lambda pair: pair[1], module.named_parameters(recurse=recurse))


class PartitionedParameterCoordinator:
    def __init__(self, prefetch_bucket_sz, max_reuse_distance_in_numel, max_available_parameters_in_numel):
        self.__prefetch_bucket_sz = prefetch_bucket_sz
        self.__max_reuse_dist_in_numel = max_reuse_distance_in_numel
        self.__max_n_available_params = max_available_parameters_in_numel
        self.__n_available_params = 0
        self.__param_queue = deque()
        self.__inflight_param_registry = {}
        self.__ongoing_fetch_events = deque()
        self.__step_id = 0

    def trace_prologue(self, sub_module):
        pass

    def is_record_trace(self):
        return False

    def record_module(self, sub_module):
        pass

    @torch.no_grad()
    def fetch_sub_module(self, current_submodule, forward: bool) -> None:
        params_to_fetch = frozenset(iter_params(current_submodule))
        fetch_numel = sum(p.partition_numel() for p in params_to_fetch if p.ds_status == ZeroParamStatus.NOT_AVAILABLE)
        if fetch_numel > 0:
            self.__all_gather_params(params_to_fetch, forward)
        for param in params_to_fetch:
            if param in self.__inflight_param_registry:
                self.__inflight_param_registry.pop(param).wait()
        self.__step_id += 1

        do_prefetch = forward and self.__prefetch_bucket_sz > 0 and len(self.__param_queue) > 0
        if do_prefetch:
            params_to_prefetch = set()
            numel_prefetching = 0
            while self.__param_queue and numel_prefetching < self.__prefetch_bucket_sz:
                param_in_trace = self.__param_queue.popleft()
                param = param_in_trace.param
                if param.ds_status == ZeroParamStatus.NOT_AVAILABLE and param not in params_to_prefetch:
                    params_to_prefetch.add(param)
                    numel_prefetching += param.ds_numel
            self.__all_gather_params(params_to_prefetch, forward)

    def __all_gather_params(self, params, forward: bool) -> None:
        partitioned_params = [p for p in params if p.ds_status == ZeroParamStatus.NOT_AVAILABLE]
        if partitioned_params:
            self.__n_available_params += sum(p.ds_numel for p in partitioned_params)
            handle = all_gather_coalesced(partitioned_params, forward=forward)
            for param in partitioned_params:
                self.__inflight_param_registry[param] = handle

    def release_sub_module(self, submodule):
        pass
