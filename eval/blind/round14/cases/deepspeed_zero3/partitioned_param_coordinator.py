# adapted from microsoft/DeepSpeed deepspeed/runtime/zero/partitioned_param_coordinator.py
import collections
from dataclasses import dataclass
from enum import Enum
from typing import Deque, Set

import torch
from torch.nn import Module, Parameter

from deepspeed.accelerator import get_accelerator
from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus
from deepspeed.utils import logger

from .utils import ZERO_FETCH_OPTIONS, assert_ints_same_as_other_ranks


def iter_params(module: Module, recurse=False):
    return map(lambda pair: pair[1], module.named_parameters(recurse=recurse))


class ZeRoTraceMode(Enum):
    # Record trace of the network during a single forward+backward (for training) or forward (for inference)
    RECORD = 1
    # Use recorded network trace to optimize current forward+backward or forward
    COMPLETE = 2
    # Recorded trace does not match current forward+backward or forward pass.
    INVALID = 3


class PartitionedParameterCoordinator:
    FORWARD_FETCH_SUBMIT = 'forward_fetch_submit'
    FORWARD_PREFETCH_SUBMIT = 'forward_prefetch_submit'

    @dataclass
    class __ParamInTrace:
        param: Parameter
        step_id_last_used_at: int

    def __init__(self, prefetch_bucket_sz: int, max_reuse_distance_in_numel: int,
                 max_available_parameters_in_numel: int, allgather_stream, inflight_param_registry) -> None:
        self.__submodule_order = []
        self.__param_order = []
        self.__most_recent_step_id_param_fetched_for = collections.defaultdict(lambda: int(-1e10))
        self.__step_id_module_fetched_for = collections.defaultdict(lambda: collections.deque())
        self.__step_id: int = 0
        self.__trace_mode: ZeRoTraceMode = ZeRoTraceMode.RECORD
        self.__allgather_stream = allgather_stream
        self.__inflight_param_registry = inflight_param_registry
        self.__prefetch_bucket_sz: int = prefetch_bucket_sz
        self.__max_reuse_dist_in_numel: int = int(max_reuse_distance_in_numel)
        self.__max_n_available_params: int = max_available_parameters_in_numel
        self.__n_available_params: int = 0
        self.__param_queue: Deque[__class__.__ParamInTrace] = None
        self.prefetch_in_forward: bool = True

    def is_complete_trace(self) -> bool:
        return self.__trace_mode == ZeRoTraceMode.COMPLETE

    def is_record_trace(self) -> bool:
        return self.__trace_mode == ZeRoTraceMode.RECORD

    def trace_prologue(self, sub_module: Module) -> None:
        if self.is_complete_trace():
            expected_module_id = self.__submodule_order[self.__step_id].ds_id
            if expected_module_id != sub_module.ds_id:
                self.__trace_mode = ZeRoTraceMode.INVALID

    def record_module(self, sub_module: Module) -> None:
        if not self.is_record_trace():
            raise RuntimeError(f"attempted to record trace when status = {self.__trace_mode}")
        self.__submodule_order.append(sub_module)
        self.__step_id_module_fetched_for[sub_module.ds_id].append(self.__step_id)

    def reset_step(self) -> None:
        """indicate that we have completed one fwd+bwd for the model"""
        if not self.is_complete_trace():
            assert_ints_same_as_other_ranks([m.ds_id for m in self.__submodule_order])
            if self.is_record_trace():
                self.__submodule_order = tuple(self.__submodule_order)
                self.__param_order = tuple(self.__param_order)
                self.__trace_mode = ZeRoTraceMode.COMPLETE
            else:
                self.__trace_mode = ZeRoTraceMode.RECORD
        self.__param_queue = collections.deque(self.__param_order)  # reset fetch queue
        self.__most_recent_step_id_param_fetched_for = collections.defaultdict(lambda: int(-1e10))
        self.__step_id_module_fetched_for = collections.defaultdict(lambda: collections.deque())
        self.__step_id = 0

    @torch.no_grad()
    def fetch_sub_module(self, current_submodule: Module, forward: bool) -> None:
        """This method does the following (in order):
        1. kick off fetch for parameters in immediately required sub module
        2. kick off fetch for next few parameters we will need later (prefetch)
        3. block on parameters in immediately required sub module
        """
        params_to_fetch = frozenset(iter_params(current_submodule))
        fetch_numel = sum([p.partition_numel() for p in params_to_fetch if p.ds_status == ZeroParamStatus.NOT_AVAILABLE])
        if fetch_numel > 0:
            self.__all_gather_params(params_to_fetch, forward)

        # wait for parameters in the immediately needed submodule to become available
        for param in params_to_fetch:
            param.ds_active_sub_modules.add(current_submodule.ds_id)
            if param in self.__inflight_param_registry:
                with get_accelerator().stream(self.__allgather_stream):
                    self.__inflight_param_registry.pop(param).wait()
            assert param.ds_status == ZeroParamStatus.AVAILABLE, param.ds_summary()
        get_accelerator().current_stream().wait_stream(self.__allgather_stream)

        # kick off parameter prefetches for upcoming modules
        # don't prefetch if we dont have a completed model trace
        if self.is_complete_trace():
            discarded_from_prefetch_queue = set()
            params_not_already_fetched = set(
                filter(lambda p: self.__most_recent_step_id_param_fetched_for[p] < self.__step_id, params_to_fetch))
            while self.__param_queue and len(discarded_from_prefetch_queue) < len(params_not_already_fetched):
                param_in_trace = self.__param_queue.popleft()
                self.__most_recent_step_id_param_fetched_for[param_in_trace.param] = param_in_trace.step_id_last_used_at
                discarded_from_prefetch_queue.add(param_in_trace.param)

            if discarded_from_prefetch_queue != params_not_already_fetched:
                raise RuntimeError(f"tracing error at step {self.__step_id}: \n"
                                   f"module id: {current_submodule.ds_id}, training: {current_submodule.training}\n")

            # kick off all gather for params in the next few submodules (prefetch)
            if self.__prefetch_bucket_sz > 0:
                max_params_to_prefetch = min(self.__max_n_available_params - self.__n_available_params,
                                             self.__prefetch_bucket_sz)
                params_to_prefetch = set()
                numel_prefetching = 0
                while self.__param_queue and numel_prefetching < max_params_to_prefetch and (not forward or self.prefetch_in_forward):
                    param_in_trace = self.__param_queue.popleft()
                    do_prefetch = param_in_trace.param.ds_status == ZeroParamStatus.NOT_AVAILABLE
                    if param_in_trace.param in params_to_prefetch:
                        # Avoid duplicates
                        do_prefetch = False
                    self.__most_recent_step_id_param_fetched_for[param_in_trace.param] = \
                        max(self.__most_recent_step_id_param_fetched_for[param_in_trace.param],
                            param_in_trace.step_id_last_used_at)
                    if do_prefetch:
                        params_to_prefetch.add(param_in_trace.param)
                        numel_prefetching += param_in_trace.param.ds_numel

                if numel_prefetching > 0:
                    self.__all_gather_params(params_to_prefetch, forward)

        self.__step_id += 1

    @torch.no_grad()
    def release_sub_module(self, submodule: Module) -> None:
        for param in iter_params(submodule):
            param.ds_active_sub_modules.discard(submodule.ds_id)
            if not param.ds_active_sub_modules and not param.ds_persist:
                param.partition()

    def __all_gather_params(self, params: Set[Parameter], forward: bool) -> None:
        """for each partitioned parameter, kick off an async allgather and store
        the work handle for the in flight parameters."""
        partitioned_params = []
        all_gather_numel = 0
        for param in params:
            if param.ds_status == ZeroParamStatus.NOT_AVAILABLE:
                partitioned_params.append(param)
                all_gather_numel += param.ds_numel

        if partitioned_params:
            self.__n_available_params += all_gather_numel
            stream = self.__allgather_stream if ZERO_FETCH_OPTIONS.use_side_stream else get_accelerator().current_stream()
            with get_accelerator().stream(stream):
                handle = partitioned_params[0].all_gather_coalesced(partitioned_params)
            for param in partitioned_params:
                assert param.ds_status == ZeroParamStatus.INFLIGHT, param.ds_summary()
                self.__inflight_param_registry[param] = handle
