from collections import OrderedDict, deque
from typing import Set

import torch

from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus

from .partition import all_gather_coalesced


class PartitionedParameterCoordinator:
    def __init__(self, prefetch_bucket_sz, max_live_parameters):
        self.__prefetch_bucket_sz = prefetch_bucket_sz
        self.__max_n_available_params = max_live_parameters
        self.__n_available_params = 0
        self.__param_queue = deque()
        self.__inflight_param_registry = {}
        self.__ongoing_fetch_events = deque()
        self.__submodule_order = []
        self.__step_id = 0

    def trace_prologue(self, sub_module):
        pass

    def is_record_trace(self):
        return False

    def record_module(self, sub_module):
        self.__submodule_order.append(sub_module)

    @torch.no_grad()
    def fetch_sub_module(self, current_submodule, forward: bool) -> None:
        params_to_fetch = frozenset(
            p for p in current_submodule.ds_params if p.ds_status == ZeroParamStatus.NOT_AVAILABLE
        )
        self.__all_gather_params(params_to_fetch, forward)

        for param in current_submodule.ds_params:
            if param in self.__inflight_param_registry:
                self.__inflight_param_registry.pop(param).wait()

        self.__step_id += 1
        # prefetch the next modules' parameters following the recorded trace
        if self.__prefetch_bucket_sz and forward:
            params_to_prefetch: Set = set()
            numel_prefetching = 0
            while self.__param_queue and numel_prefetching < self.__prefetch_bucket_sz:
                param_in_trace = self.__param_queue.popleft()
                if param_in_trace.param.ds_status == ZeroParamStatus.NOT_AVAILABLE:
                    params_to_prefetch.add(param_in_trace.param)
                    numel_prefetching += param_in_trace.param.ds_numel
            self.__all_gather_params(params_to_prefetch, forward)

    def __all_gather_params(self, params, forward):
        if not params:
            return
        handle = all_gather_coalesced(sorted(params, key=lambda p: p.ds_id), forward=forward)
        for param in params:
            self.__inflight_param_registry[param] = handle
            self.__n_available_params += param.ds_numel

    def release_sub_module(self, submodule):
        for param in submodule.ds_params:
            param.partition()
