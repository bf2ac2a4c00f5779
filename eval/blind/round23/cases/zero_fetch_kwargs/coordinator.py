# adapted from microsoft/DeepSpeed deepspeed/runtime/zero/parameter_offload.py
from collections import OrderedDict

import torch

from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus, iter_params


class PartitionedParameterCoordinator:
    def __init__(self, prefetch_bucket_sz, max_reuse_distance_in_numel, max_available_parameters_in_numel,
                 allgather_stream, inflight_param_registry, timers):
        self.__prefetch_bucket_sz = prefetch_bucket_sz
        self.__max_reuse_distance_in_numel = max_reuse_distance_in_numel
        self.__allgather_stream = allgather_stream
        self.__inflight_param_registry = inflight_param_registry
        self.__param_queue = None
        self.__step_id = 0
        self.fetch_kwargs = {}
        self.timers = timers

    def reset_step(self):
        self.__step_id = 0

    def _prefetch_candidates(self, current_submodule):
        if self.__param_queue is None:
            return []
        return [p for p in self.__param_queue if p.ds_status == ZeroParamStatus.NOT_AVAILABLE]

    @torch.no_grad()
    def fetch_sub_module(self, current_submodule: torch.nn.Module, forward: bool) -> None:
        params_to_fetch = frozenset(iter_params(current_submodule, recurse=False))
        self.__all_gather_params(params_to_fetch, forward)
        for param in params_to_fetch:
            param.ds_active_sub_modules.add(current_submodule.id)

        kwargs = getattr(self, "fetch_kwargs", {})
        if kwargs.get("prefetch", True) and self.__prefetch_bucket_sz > 0:
            numel_prefetching = 0
            params_to_prefetch = []
            for param in self._prefetch_candidates(current_submodule):
                if numel_prefetching >= self.__prefetch_bucket_sz:
                    break
                params_to_prefetch.append(param)
                numel_prefetching += param.ds_numel
            self.__all_gather_params(params_to_prefetch, forward)
        self.__step_id += 1

    def __all_gather_params(self, params, forward):
        if not params:
            return
        with torch.cuda.stream(self.__allgather_stream):
            plist = list(params)
            handle = plist[0].all_gather_coalesced(plist, forward=forward)
        self.__inflight_param_registry.update({p: handle for p in params})
