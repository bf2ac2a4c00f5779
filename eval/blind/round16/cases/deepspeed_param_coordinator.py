# adapted from microsoft/DeepSpeed deepspeed/runtime/zero/partitioned_param_coordinator.py
import collections

import torch
from torch.nn import Module

from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus
from deepspeed.runtime.zero.utils import iter_params


class PartitionedParameterCoordinator:
    def __init__(self, prefetch_bucket_sz: int, max_available_parameters_in_numel: int):
        self.__param_queue = None
        self.__prefetch_bucket_sz = prefetch_bucket_sz
        self.__max_n_available_params = max_available_parameters_in_numel
        self.__n_available_params = 0
        self.__step_id = 0
        self.__most_recent_step_id_param_fetched_for = collections.defaultdict(lambda: int(-1e10))

    def is_complete_trace(self) -> bool:
        return self.__param_queue is not None

    def reset_step(self) -> None:
        """indicate that we have completed one fwd+bwd for the model"""
        self.__param_queue = None
        self.__step_id = 0

    def fetch_sub_module(self, current_submodule: Module, forward: bool) -> None:
        params_to_fetch = frozenset(iter_params(current_submodule))
        self.__all_gather_params(params_to_fetch, forward)
        if self.is_complete_trace() and self.__prefetch_bucket_sz > 0:
            max_params_to_prefetch = min(self.__max_n_available_params - self.__n_available_params,
                                         self.__prefetch_bucket_sz)
            params_to_prefetch = set()
            numel_prefetching = 0
            while self.__param_queue and numel_prefetching < max_params_to_prefetch and torch.is_grad_enabled():
                param_in_trace = self.__param_queue.popleft()
                if param_in_trace.param.ds_status == ZeroParamStatus.NOT_AVAILABLE:
                    params_to_prefetch.add(param_in_trace.param)
                    numel_prefetching += param_in_trace.param.ds_numel
            if numel_prefetching > 0:
                self.__all_gather_params(params_to_prefetch, forward)
        self.__step_id += 1

    def __all_gather_params(self, params, forward):
        for param in params:
            param.all_gather_coalesced([param])


class DeepSpeedZeRoOffload:
    def __init__(self, module, prefetch_bucket_sz, max_live):
        self.module = module
        self.fwd_coordinator = PartitionedParameterCoordinator(prefetch_bucket_sz, max_live)
        self.eval_coordinator = PartitionedParameterCoordinator(prefetch_bucket_sz, max_live)
        self._n_no_grad_forwards = 0

    def _end_of_forward_hook(self, module, *args):
        if not torch._C.is_grad_enabled():
            self._n_no_grad_forwards += 1
        coordinator = self.fwd_coordinator if torch._C.is_grad_enabled() else self.eval_coordinator
        coordinator.reset_step()

    def setup_zero_stage3_hooks(self):
        self.module.register_forward_hook(self._end_of_forward_hook)
