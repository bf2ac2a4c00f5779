from collections import OrderedDict

import torch

from .allgather import all_gather_coalesced


class PartitionedParameterCoordinator:
    def __init__(self, prefetch_bucket_sz: int, max_reuse_distance_in_numel: int,
                 zero_quantized_weights: bool = False, zero_hpz_partition_size: int = 1):
        self.__max_n_available_params = prefetch_bucket_sz
        self.__prefetch_bucket_sz = prefetch_bucket_sz
        self.__max_reuse_dist_in_numel = max_reuse_distance_in_numel
        self.zero_quantized_weights = zero_quantized_weights
        self.zero_hpz_partition_size = zero_hpz_partition_size
        self.__param_queue = []
        self.__inflight = OrderedDict()

    def fetch_sub_module(self, current_submodule, ctx) -> None:
        params_to_fetch = [p for p in current_submodule.parameters(recurse=False) if p not in self.__inflight]
        if params_to_fetch:
            handle = all_gather_coalesced(params_to_fetch, ctx, quantize=self.zero_quantized_weights)
            for p in params_to_fetch:
                self.__inflight[p] = handle
        for p in current_submodule.parameters(recurse=False):
            self.__inflight.pop(p).wait()

        bucket = self.__prefetch_bucket_sz if ctx.needs_backward else 0
        numel_prefetching = 0
        while self.__param_queue and numel_prefetching < bucket:
            param = self.__param_queue.pop(0)
            if param in self.__inflight:
                continue
            self.__inflight[param] = all_gather_coalesced([param], ctx, quantize=self.zero_quantized_weights)
            numel_prefetching += param.ds_numel

    def release_sub_module(self, submodule, ctx) -> None:
        for param in submodule.parameters(recurse=False):
            if ctx.needs_backward and self.zero_hpz_partition_size > 1:
                param.partition(has_been_updated=False, free_data=True, secondary=True)
            else:
                param.partition(free_data=True)
