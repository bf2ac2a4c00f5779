# adapted from microsoft/DeepSpeed deepspeed/runtime/zero/partitioned_param_coordinator.py
import collections
from collections import UserDict
from enum import Enum

import torch

from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus
from deepspeed.utils import z3_leaf_module


class ZeRoTraceMode(Enum):
    RECORD = 1
    COMPLETE = 2
    INVALID = 3


class InflightParamRegistry(UserDict):
    """registry for parameters in flight"""


def iter_params(module, recurse=False):
    return map(lambda pair: pair[1], module.named_parameters(recurse=recurse))


class PartitionedParameterCoordinator:
    def __init__(self, prefetch_bucket_sz, max_reuse_distance_in_numel, max_available_parameters_in_numel,
                 allgather_stream, inflight_param_registry):
        self.__inflight_param_registry = inflight_param_registry
        self.__step_id = 0
        self.__trace_mode = ZeRoTraceMode.INVALID
        self.__submodule_order = []
        self.__param_queue = None
        self.__prefetch_bucket_sz = prefetch_bucket_sz
        self.__allgather_stream = allgather_stream

    def is_complete_trace(self) -> bool:
        return self.__trace_mode == ZeRoTraceMode.COMPLETE

    def is_record_trace(self) -> bool:
        return self.__trace_mode == ZeRoTraceMode.RECORD

    def reset_step(self) -> None:
        """indicate that we have completed one fwd+bwd for the model"""
        if not self.is_complete_trace():
            if self.is_record_trace():
                self.__submodule_order = tuple(self.__submodule_order)  # freeze
                self.__trace_mode = ZeRoTraceMode.COMPLETE
            else:
                # Enable trace recording for next forward/backward pass
                self.__trace_mode = ZeRoTraceMode.RECORD
        self.__param_queue = collections.deque(self.__submodule_order)  # reset fetch queue
        self.__step_id = 0

    @torch.no_grad()
    def fetch_sub_module(self, current_submodule, forward: bool, prefetch: bool = True) -> None:
        params_to_fetch = frozenset(iter_params(current_submodule, recurse=z3_leaf_module(current_submodule)))
        self.__all_gather_params(params_to_fetch, forward)

        for param in params_to_fetch:
            if param in self.__inflight_param_registry:
                self.__inflight_param_registry.pop(param).wait()

        # kick off parameter prefetches for upcoming modules
        # don't prefetch if we dont have a completed model trace
        if prefetch and self.is_complete_trace():
            params_to_prefetch = set()
            numel_prefetching = 0
            while self.__param_queue and numel_prefetching < self.__prefetch_bucket_sz:
                param_in_trace = self.__param_queue.popleft()
                if param_in_trace.param.ds_status == ZeroParamStatus.NOT_AVAILABLE:
                    params_to_prefetch.add(param_in_trace.param)
                    numel_prefetching += param_in_trace.param.ds_numel
            with torch.cuda.stream(self.__allgather_stream):
                self.__all_gather_params(params_to_prefetch, forward)

        self.__step_id += 1
