"""Fetching, prefetching, and releasing ZeRO-3 parameters (cf. partitioned_param_coordinator.py)."""
import collections
from typing import Deque, Set

import torch
from torch.nn import Module, Parameter

from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus
from deepspeed.utils import logger


def iter_params(module: Module, recurse=False):
    return map(lambda pair: pair[1], module.named_parameters(recurse=recurse))


class PartitionedParameterCoordinator:

    def __init__(self, prefetch_bucket_sz: int, max_reuse_distance_in_numel: int,
                 max_available_parameters_in_numel: int, allgather_stream, zero_quantized_weights: bool = False):
        self.__param_queue: Deque = collections.deque()
        self.__prefetch_bucket_sz = prefetch_bucket_sz
        self.__max_n_available_params = max_available_parameters_in_numel
        self.__n_available_params = 0
        self.__allgather_stream = allgather_stream
        self.__ongoing_fetch_events: Deque = collections.deque()
        self.zero_quantized_weights = zero_quantized_weights
        self.__inflight_param_registry = {}

    def fetch_sub_module(self, current_submodule: Module, forward: bool, grad_mode: bool = True) -> None:
        """This method does the following (in order):
        1. kick off fetch for parameters in immediately required sub module
        2. kick off fetch for next few parameters we will need later (prefetch)
        3. block on parameters in immediately required sub module
        """
        params_to_fetch = set(iter_params(current_submodule, recurse=False))
        params_not_already_fetched = {p for p in params_to_fetch if p.ds_status == ZeroParamStatus.NOT_AVAILABLE}

        quantize = self.zero_quantized_weights and grad_mode
        self.__all_gather_params(params_not_already_fetched, forward, quantize=quantize)

        for param in params_to_fetch:
            if param in self.__inflight_param_registry:
                with torch.cuda.stream(self.__allgather_stream):
                    self.__inflight_param_registry.pop(param).wait()
        torch.cuda.current_stream().wait_stream(self.__allgather_stream)

        if self.__prefetch_bucket_sz > 0:
            max_params_to_prefetch = min(self.__max_n_available_params - self.__n_available_params,
                                         self.__prefetch_bucket_sz)
            params_to_prefetch: Set[Parameter] = set()
            numel_prefetching = 0
            while self.__param_queue and numel_prefetching < max_params_to_prefetch and grad_mode:
                param_in_trace = self.__param_queue.popleft()
                if param_in_trace.param.ds_status == ZeroParamStatus.NOT_AVAILABLE:
                    params_to_prefetch.add(param_in_trace.param)
                    numel_prefetching += param_in_trace.param.ds_numel
            if numel_prefetching > 0:
                logger.debug(f"prefetching {numel_prefetching} elements")
                self.__all_gather_params(params_to_prefetch, forward, quantize=quantize)

    def __all_gather_params(self, params: Set[Parameter], forward: bool, quantize: bool = False) -> None:
        if not params:
            return
        with torch.cuda.stream(self.__allgather_stream):
            handle = next(iter(params)).all_gather_coalesced(list(params), forward=forward, quantize=quantize)
        for param in params:
            self.__inflight_param_registry[param] = handle
            self.__n_available_params += param.ds_numel

    def release_sub_module(self, submodule: Module, forward=False) -> None:
        for param in iter_params(submodule, recurse=False):
            if not param.ds_active_sub_modules and not param.ds_persist:
                param.partition(free_data=True)
                self.__n_available_params -= param.ds_numel
