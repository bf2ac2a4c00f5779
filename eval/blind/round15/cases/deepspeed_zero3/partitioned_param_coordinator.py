# adapted from microsoft/DeepSpeed deepspeed/runtime/zero/partitioned_param_coordinator.py
import collections
from dataclasses import dataclass
from enum import Enum
from typing import Deque, Set

import torch
from torch.nn import Module, Parameter

from deepspeed.accelerator import get_accelerator
from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus
from deepspeed.runtime.zero.utils import assert_ints_same_as_other_ranks, is_zero_param
from deepspeed.utils import logger, z3_leaf_module
from deepspeed.utils.debug import debug_module2name_id


def iter_params(module: Module, recurse=False):
    return map(lambda pair: pair[1], module.named_parameters(recurse=recurse))


class ZeRoTraceMode(Enum):
    # Record trace of the network during a single forward+backward (for training) or forward (for inference)
    RECORD = 1
    # Use recorded network trace to optimize current forward+backward or forward
    COMPLETE = 2
    # Recorded trace does not match current forward+backward or forward pass.
    INVALID = 3


class InflightParamRegistry(dict):
    """registry for parameters in flight"""

    def __setitem__(self, param: Parameter, handle) -> None:
        if param in self:
            raise RuntimeError(f"{param.ds_summary()} already in registry")
        if param.ds_status != ZeroParamStatus.INFLIGHT:
            raise RuntimeError(f"attempted to add non-inflight parameter to registry {param.ds_summary()}")
        super().__setitem__(param, handle)


class PartitionedParameterCoordinator:
    """Handles partitioning and gathering of parameters."""

    @dataclass
    class __ParamInTrace:
        param: Parameter
        step_id_last_used_at: int

    def __init__(
        self,
        prefetch_bucket_sz: int,
        max_reuse_distance_in_numel: int,
        max_available_parameters_in_numel: int,
        allgather_stream,
        inflight_param_registry: InflightParamRegistry,
        prefetch_nvme: bool = False,
        timers=None,
    ) -> None:
        self.__submodule_order = []
        self.__param_order = []
        self.__most_recent_step_id_param_fetched_for = collections.defaultdict(lambda: int(-1e10))
        self.__step_id_module_fetched_for = collections.defaultdict(lambda: collections.deque())
        self.__step_id: int = 0
        self.__trace_mode: ZeRoTraceMode = ZeRoTraceMode.RECORD
        self.__n_grad_fwd_modules: int = 0
        self.__inflight_param_registry = inflight_param_registry
        self.__param_queue: Deque[__class__.__ParamInTrace] = None
        self.__prefetch_bucket_sz: int = prefetch_bucket_sz
        self.__prefetch_nvme: bool = prefetch_nvme
        self.__max_n_available_params: int = max_available_parameters_in_numel
        self.__n_available_params: int = 0
        self.__allgather_stream = allgather_stream
        self.timers = timers

    def is_complete_trace(self) -> bool:
        return self.__trace_mode == ZeRoTraceMode.COMPLETE

    def is_invalid_trace(self) -> bool:
        return self.__trace_mode == ZeRoTraceMode.INVALID

    def is_record_trace(self) -> bool:
        return self.__trace_mode == ZeRoTraceMode.RECORD

    def _invalidate_trace(self) -> None:
        if self.is_invalid_trace():
            raise RuntimeError("attempted to invalidate already invalid trace")
        self.__trace_mode = ZeRoTraceMode.INVALID
        self._clear_trace_structures()

    def _clear_trace_structures(self) -> None:
        self.__submodule_order = []
        self.__param_order = []
        self.__most_recent_step_id_param_fetched_for = collections.defaultdict(lambda: int(-1e10))
        self.__param_queue = collections.deque()

    def trace_prologue(self, sub_module: Module) -> None:
        if self.is_complete_trace():
            if self.__step_id >= len(self.__submodule_order):
                self._invalidate_trace()
                return
            if sub_module != self.__submodule_order[self.__step_id]:
                self._invalidate_trace()

    def record_module(self, sub_module: Module) -> None:
        """adds sub module to trace"""
        if not self.is_record_trace():
            raise RuntimeError(f"attempted to record trace when status = {self.__trace_mode}")
        self.__submodule_order.append(sub_module)
        self.__step_id_module_fetched_for[sub_module.ds_id].append(self.__step_id)
        if torch.is_grad_enabled():
            self.__n_grad_fwd_modules += 1

    def record_parameters(self, sub_module: Module) -> None:
        if not self.is_record_trace():
            raise RuntimeError(f"attempted to record trace when status = {self.__trace_mode}")
        step_id = self.__step_id_module_fetched_for[sub_module.ds_id].popleft()
        for param in sorted(set(iter_params(sub_module, recurse=z3_leaf_module(sub_module))), key=lambda p: p.ds_id):
            self.__param_order.append(__class__.__ParamInTrace(param=param, step_id_last_used_at=step_id))

    def construct_parameter_trace_from_module_trace(self):
        """use module trace to construct parameter trace"""
        self.__param_order = []
        for sub_module in self.__submodule_order:
            self.record_parameters(sub_module)

    def reset_step(self) -> None:
        """indicate that we have completed one fwd+bwd for the model"""
        if not self.is_complete_trace():
            assert_ints_same_as_other_ranks([m.ds_id for m in self.__submodule_order])
            if self.is_record_trace():
                self.construct_parameter_trace_from_module_trace()
                assert_ints_same_as_other_ranks([p.param.ds_id for p in self.__param_order])
                self.__submodule_order = tuple(self.__submodule_order)
                self.__param_order = tuple(self.__param_order)
                self.__trace_mode = ZeRoTraceMode.COMPLETE
            else:
                self.__trace_mode = ZeRoTraceMode.RECORD
        self.__param_queue = collections.deque(self.__param_order)
        self.__most_recent_step_id_param_fetched_for = collections.defaultdict(lambda: int(-1e10))
        self.__step_id_module_fetched_for = collections.defaultdict(lambda: collections.deque())
        self.__step_id = 0

    def debug_summary(self) -> str:
        return (
            f"step={self.__step_id} trace={self.__trace_mode} "
            f"grad_fwd_modules={self.__n_grad_fwd_modules} available={self.__n_available_params}"
        )

    @torch.no_grad()
    def fetch_sub_module(self, current_submodule: Module, forward: bool, prefetch: bool = True) -> None:
        """This method does the following (in order):
        1. kick off fetch for parameters in immediately required sub module
        2. kick off fetch for next few parameters we will need later (prefetch)
        3. block on parameters in immediately required sub module
        """
        params_to_fetch = frozenset(iter_params(current_submodule, recurse=z3_leaf_module(current_submodule)))
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
                filter(lambda p: self.__most_recent_step_id_param_fetched_for[p] < self.__step_id, params_to_fetch)
            )
            while self.__param_queue and len(discarded_from_prefetch_queue) < len(params_not_already_fetched):
                param_in_trace = self.__param_queue.popleft()
                self.__most_recent_step_id_param_fetched_for[param_in_trace.param] = param_in_trace.step_id_last_used_at
                discarded_from_prefetch_queue.add(param_in_trace.param)

            if discarded_from_prefetch_queue != params_not_already_fetched:
                raise RuntimeError(
                    f"tracing error at step {self.__step_id}: \n"
                    f"module id: {current_submodule.ds_id}, training: {current_submodule.training}\n"
                )

            # kick off all gather for params in the next few submodules (prefetch)
            if self.__prefetch_bucket_sz > 0:
                max_params_to_prefetch = min(
                    self.__max_n_available_params - self.__n_available_params, self.__prefetch_bucket_sz
                )
                params_to_prefetch = set()
                numel_prefetching = 0
                while prefetch and self.__param_queue and numel_prefetching < max_params_to_prefetch:
                    param_in_trace: __class__.__ParamInTrace = self.__param_queue.popleft()
                    do_prefetch = param_in_trace.param.ds_status == ZeroParamStatus.NOT_AVAILABLE
                    if param_in_trace.param in params_to_prefetch:
                        do_prefetch = False
                    self.__most_recent_step_id_param_fetched_for[param_in_trace.param] = max(
                        self.__most_recent_step_id_param_fetched_for[param_in_trace.param],
                        param_in_trace.step_id_last_used_at,
                    )
                    if do_prefetch:
                        params_to_prefetch.add(param_in_trace.param)
                        numel_prefetching += param_in_trace.param.ds_numel

                if numel_prefetching > 0:
                    self.__all_gather_params(params_to_prefetch, forward)

        self.__step_id += 1

    @torch.no_grad()
    def release_sub_module(self, submodule: Module) -> None:
        """release the parameters of a sub module, assuming they meet conditions to
        be released."""
        for param in iter_params(submodule, recurse=z3_leaf_module(submodule)):
            param.ds_active_sub_modules.discard(submodule.ds_id)
            if not param.ds_active_sub_modules and not param.ds_persist and not param.is_external_param:
                param.partition()
                self.__n_available_params -= param.ds_numel

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
            with get_accelerator().stream(self.__allgather_stream):
                handle = partitioned_params[0].all_gather_coalesced(partitioned_params, forward=forward)
            for param in partitioned_params:
                assert param.ds_status == ZeroParamStatus.INFLIGHT, param.ds_summary()
                self.__inflight_param_registry[param] = handle
