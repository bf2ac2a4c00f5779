# Modelled on DeepSpeed deepspeed/runtime/zero/partitioned_param_coordinator.py
from collections import deque
from typing import Set

import torch
from torch.nn import Module, Parameter

from deepspeed.accelerator import get_accelerator
from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus
from deepspeed.utils import instrument_w_nvtx


def iter_params(module: Module, recurse=False):
    return map(lambda pair: pair[1], module.named_parameters(recurse=recurse))


class PartitionedParameterCoordinator:
    def __init__(self, prefetch_bucket_sz: int, max_reuse_distance_in_numel: int,
                 max_available_parameters_in_numel: int, allgather_stream, zero_quantized_weights=False):
        self.__inflight_param_registry = dict()
        self.__n_available_params: int = 0
        self.__max_n_available_params: int = max_available_parameters_in_numel
        self.__prefetch_bucket_sz: int = prefetch_bucket_sz
        self.__param_queue = None
        self.__allgather_stream = allgather_stream
        self.__ongoing_fetch_events = deque()
        self.zero_quantized_weights = zero_quantized_weights

    def fetch_sub_module(self, current_submodule: Module, forward: bool) -> None:
        params_to_fetch = set(iter_params(current_submodule))
        fetch_numel = sum(p.partition_numel() for p in params_to_fetch if p.ds_status == ZeroParamStatus.NOT_AVAILABLE)
        if fetch_numel > 0:
            quantize = self.zero_quantized_weights or (
                forward and not getattr(current_submodule, "_ds_fwd_grad_enabled", True))
            self.__all_gather_params(params_to_fetch, forward, quantize=quantize)

        for param in params_to_fetch:
            param.ds_active_sub_modules.add(current_submodule.ds_id)
            if param in self.__inflight_param_registry:
                with get_accelerator().stream(self.__allgather_stream):
                    self.__inflight_param_registry.pop(param).wait()
            assert param.ds_status == ZeroParamStatus.AVAILABLE, param.ds_summary()
        get_accelerator().current_stream().wait_stream(self.__allgather_stream)

        # kick off parameter prefetches for upcoming modules
        if self.is_complete_trace() and getattr(current_submodule, "_ds_fwd_grad_enabled", True):
            if self.__prefetch_bucket_sz > 0:
                max_params_to_prefetch = min(self.__max_n_available_params - self.__n_available_params,
                                             self.__prefetch_bucket_sz)
                params_to_prefetch = set()
                numel_prefetching = 0
                while self.__param_queue and numel_prefetching < max_params_to_prefetch:
                    param_in_trace = self.__param_queue.popleft()
                    if param_in_trace.param.ds_status == ZeroParamStatus.NOT_AVAILABLE:
                        params_to_prefetch.add(param_in_trace.param)
                        numel_prefetching += param_in_trace.param.ds_numel
                if numel_prefetching > 0:
                    self.__all_gather_params(params_to_prefetch, forward, quantize=self.zero_quantized_weights)

    @instrument_w_nvtx
    def __all_gather_params(self, params: Set[Parameter], forward: bool, quantize: bool = False) -> None:
        partitioned_params = [p for p in params if p.ds_status == ZeroParamStatus.NOT_AVAILABLE]
        if partitioned_params:
            self.__n_available_params += sum(p.ds_numel for p in partitioned_params)
            with get_accelerator().stream(self.__allgather_stream):
                handle = partitioned_params[0].all_gather_coalesced(partitioned_params, quantize=quantize)
            for param in partitioned_params:
                self.__inflight_param_registry[param] = handle

    def is_complete_trace(self) -> bool:
        return self._trace_mode == "complete"
