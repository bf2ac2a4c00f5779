# adapted from deepspeedai/DeepSpeed deepspeed/runtime/zero/parameter_offload.py
import torch

from .state import FWD_STATE


class PartitionedParameterCoordinator:

    def __init__(self, prefetch_bucket_sz, max_reuse_distance_in_numel, max_available_parameters_in_numel):
        self.__prefetch_bucket_sz = prefetch_bucket_sz
        self.__max_reuse_distance_in_numel = max_reuse_distance_in_numel
        self.__max_n_available_params = max_available_parameters_in_numel
        self.__submodule_order = []
        self.__step_id = 0
        self.__param_queue = None

    def is_complete_trace(self) -> bool:
        return len(self.__submodule_order) > 0

    def reset_step(self):
        self.__step_id = 0
        self.__param_queue = list(self.__submodule_order)

    @torch.no_grad()
    def fetch_sub_module(self, current_submodule, forward: bool) -> None:
        params_to_fetch = [p for p in current_submodule.parameters(recurse=False) if not p.ds_persist]
        self.__all_gather_params(params_to_fetch, forward)
        for param in params_to_fetch:
            param.ds_active_sub_modules.add(current_submodule.ds_id)

        # kick off all-gathers for upcoming sub-modules while this one computes
        if FWD_STATE.grad_enabled and self.is_complete_trace():
            numel_prefetching = 0
            while self.__param_queue and numel_prefetching < self.__prefetch_bucket_sz:
                param_in_trace = self.__param_queue.pop(0)
                numel_prefetching += param_in_trace.ds_numel
                self.__all_gather_params([param_in_trace], forward)
        self.__step_id += 1

    def __all_gather_params(self, params, forward):
        for param in params:
            param.all_gather_coalesced([param], forward=forward, quantize=False)
