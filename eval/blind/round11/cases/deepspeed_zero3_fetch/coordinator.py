# Adapted from deepspeedai/DeepSpeed deepspeed/runtime/zero/partitioned_param_coordinator.py
# (PartitionedParameterCoordinator.fetch_sub_module / release_sub_module).
from typing import Set

import torch

from deepspeed.accelerator import get_accelerator
from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus


class PartitionedParameterCoordinator:
    def __init__(self, prefetch_bucket_sz: int, max_reuse_distance_in_numel: int, allgather_stream=None):
        self.__prefetch_bucket_sz = prefetch_bucket_sz
        self.__max_reuse_dist_in_numel = max_reuse_distance_in_numel
        self.__allgather_stream = allgather_stream or get_accelerator().Stream()
        self.__inflight_param_registry = {}
        self.__n_available_params = 0

    @torch.no_grad()
    def fetch_sub_module(self, current_submodule: torch.nn.Module, forward: bool) -> None:
        params_to_fetch = frozenset(p for p in current_submodule.parameters(recurse=False)
                                    if p.ds_status == ZeroParamStatus.NOT_AVAILABLE)
        self.__all_gather_params(params_to_fetch, forward)
        for param in current_submodule.parameters(recurse=False):
            if param in self.__inflight_param_registry:
                self.__inflight_param_registry.pop(param).wait()

        if self.__prefetch_bucket_sz > 0 and forward:
            upcoming = self.__params_in_next_submodules(current_submodule)
            prefetch = [p for p in upcoming if getattr(current_submodule, "_ds_grad_mode", True) and not p.ds_persist]
            numel_prefetching = 0
            for param in prefetch:
                if numel_prefetching + param.ds_numel > self.__prefetch_bucket_sz:
                    break
                numel_prefetching += param.ds_numel
                self.__all_gather_params({param}, forward)

    @torch.no_grad()
    def release_sub_module(self, submodule: torch.nn.Module, forward: bool) -> None:
        if not getattr(submodule, "_ds_grad_mode", True) and self.__max_reuse_dist_in_numel > 0:
            return
        params_to_release: Set = {p for p in submodule.parameters(recurse=False) if not p.ds_active_sub_modules}
        for param in params_to_release:
            if not param.ds_persist and param.ds_status == ZeroParamStatus.AVAILABLE:
                param.partition()
                self.__n_available_params -= param.ds_numel

    def __all_gather_params(self, params, forward: bool) -> None:
        if not params:
            return
        with get_accelerator().stream(self.__allgather_stream):
            handle = params[0].all_gather_coalesced(list(params), forward=forward) if isinstance(params, list) else \
                next(iter(params)).all_gather_coalesced(list(params), forward=forward)
        for param in params:
            self.__inflight_param_registry[param] = handle

    def __params_in_next_submodules(self, submodule):
        return [p for m in getattr(submodule, "_ds_next_modules", []) for p in m.parameters(recurse=False)]
