# adapted from microsoft/DeepSpeed deepspeed/runtime/zero/parameter_offload.py
from collections import deque
from typing import Deque, Set

import torch
from torch.nn import Module

from deepspeed.utils import logger
from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus


class PartitionedParameterCoordinator:
    """Handles partitioning and gathering of parameters."""

    def __init__(self, prefetch_bucket_sz: int, max_reuse_distance_in_numel: int,
                 max_available_parameters_in_numel: int, allgather_stream, inflight_param_registry,
                 prefetch_nvme: bool = False, timers=None, zero_quantized_weights=False,
                 zero_quantized_nontrainable_weights=False) -> None:
        self.__inflight_param_registry = inflight_param_registry
        self.__step_id: int = 0
        self.__prefetch_bucket_sz: int = prefetch_bucket_sz
        self.__prefetch_nvme: bool = prefetch_nvme
        self.__max_n_available_params: int = max_available_parameters_in_numel
        self.__max_reuse_dist_in_numel: int = max_reuse_distance_in_numel
        self.__allgather_stream = allgather_stream
        self.__param_queue: Deque = deque()
        self.__most_recent_step_id_param_fetched_for = {}
        self.__submodule_order = []
        self.__param_order = []
        self.__trace_mode = "RECORD"

    def is_record_trace(self) -> bool:
        return self.__trace_mode == "RECORD"

    def reset_step(self) -> None:
        """indicate that we have completed one fwd+bwd for the model"""
        self.__step_id = 0
        self.__param_queue = deque(self.__param_order)
        self.__most_recent_step_id_param_fetched_for.clear()

    def trace_prologue(self, sub_module: Module) -> None:
        if self.is_record_trace():
            self.__submodule_order.append(sub_module)

    def record_module(self, sub_module: Module) -> None:
        self.__submodule_order.append(sub_module)

    @torch.no_grad()
    def fetch_sub_module(self, current_submodule: Module, forward: bool) -> None:
        """This method does the following (in order):
        1. kick off fetch for parameters in immediately required sub module
        2. kick off fetch for parameters in upcoming sub modules (prefetch)
        3. block on parameters in immediately required sub module
        """
        params_to_fetch = frozenset(iter_params(current_submodule, recurse=False))
        self.__all_gather_params(params_to_fetch, forward)

        # kick off parameter prefetches for upcoming modules
        # don't prefetch if we dont have a completed model trace
        if self.__prefetch_bucket_sz > 0 and getattr(current_submodule, "ds_grad_mode", True):
            numel_prefetching = 0
            while self.__param_queue and numel_prefetching < self.__prefetch_bucket_sz:
                param_in_trace = self.__param_queue.popleft()
                if param_in_trace.param.ds_status == ZeroParamStatus.NOT_AVAILABLE:
                    self.__all_gather_params({param_in_trace.param}, forward)
                    numel_prefetching += param_in_trace.param.ds_numel

        for param in params_to_fetch:
            param.ds_active_sub_modules.add(current_submodule.id)
            if param in self.__inflight_param_registry:
                self.__inflight_param_registry.pop(param).wait()

    @torch.no_grad()
    def release_sub_module(self, submodule: Module) -> None:
        for param in iter_params(submodule, recurse=False):
            param.ds_active_sub_modules.discard(submodule.id)
            if not param.ds_active_sub_modules and not param.ds_persist:
                param.partition()
