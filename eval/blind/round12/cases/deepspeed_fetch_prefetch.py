# adapted from microsoft/DeepSpeed deepspeed/runtime/zero/partitioned_param_coordinator.py
from typing import Optional

import torch
from torch.nn import Module

from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus
from deepspeed.accelerator import get_accelerator


def iter_params(module, recurse=False):
    return map(lambda pair: pair[1], module.named_parameters(recurse=recurse))


class PartitionedParameterCoordinator:
    def __init__(self, prefetch_bucket_sz, max_available_parameters_in_numel, allgather_stream):
        self.__prefetch_bucket_sz = prefetch_bucket_sz
        self.__max_n_available_params = max_available_parameters_in_numel
        self.__n_available_params = 0
        self.__param_queue = None
        self.__inflight_param_registry = dict()
        self.__allgather_stream = allgather_stream
        self.__step_id = 0

    def is_complete_trace(self) -> bool:
        return self.__param_queue is not None

    def fetch_sub_module(self, current_submodule: Module, forward: bool, overlap: Optional[bool] = None) -> None:
        if overlap is None:
            overlap = torch.is_grad_enabled()
        params_to_fetch = frozenset(iter_params(current_submodule))
        fetch_numel = sum(
            [p.partition_numel() for p in params_to_fetch if p.ds_status == ZeroParamStatus.NOT_AVAILABLE])

        if fetch_numel > 0:
            self.__all_gather_params(params_to_fetch, forward)

        for param in params_to_fetch:
            param.ds_active_sub_modules.add(current_submodule.ds_id)
            if param in self.__inflight_param_registry:
                if overlap:
                    with get_accelerator().stream(self.__allgather_stream):
                        self.__inflight_param_registry.pop(param).wait()
                else:
                    self.__inflight_param_registry.pop(param).wait()
            assert param.ds_status == ZeroParamStatus.AVAILABLE, param.ds_summary()
        get_accelerator().current_stream().wait_stream(self.__allgather_stream)

        prefetch_ok = torch.is_grad_enabled()
        if self.is_complete_trace() and self.__prefetch_bucket_sz > 0:
            max_params_to_prefetch = min(self.__max_n_available_params - self.__n_available_params,
                                         self.__prefetch_bucket_sz)
            params_to_prefetch = set()
            numel_prefetching = 0
            while prefetch_ok and self.__param_queue and numel_prefetching < max_params_to_prefetch:
                param_in_trace = self.__param_queue.popleft()
                if param_in_trace.param.ds_status == ZeroParamStatus.NOT_AVAILABLE:
                    params_to_prefetch.add(param_in_trace.param)
                    numel_prefetching += param_in_trace.param.ds_numel
            if numel_prefetching > 0:
                self.__all_gather_params(params_to_prefetch, forward)

        self.__step_id += 1

    def __all_gather_params(self, params, forward: bool) -> None:
        partitioned_params = [p for p in params if p.ds_status == ZeroParamStatus.NOT_AVAILABLE]
        if partitioned_params:
            self.__n_available_params += sum(p.ds_numel for p in partitioned_params)
            with get_accelerator().stream(self.__allgather_stream):
                handle = partitioned_params[0].all_gather_coalesced(partitioned_params)
            for param in partitioned_params:
                assert param.ds_status == ZeroParamStatus.INFLIGHT, param.ds_summary()
                self.__inflight_param_registry[param] = handle
