# adapted from microsoft/DeepSpeed deepspeed/runtime/zero/parameter_offload.py
import torch

from deepspeed.runtime.zero.partitioned_param_coordinator import PartitionedParameterCoordinator
from deepspeed.utils import instrument_w_nvtx

FWD_MODULE_STACK = list()


class DeepSpeedZeRoOffload(object):
    def __init__(self, module, prefetch_bucket_size, max_live_parameters, max_reuse_distance):
        self.module = module
        self.forward_hooks = []
        self.backward_hooks = []
        self._train_coordinator = PartitionedParameterCoordinator(
            prefetch_bucket_sz=prefetch_bucket_size,
            max_reuse_distance_in_numel=max_reuse_distance,
            max_available_parameters_in_numel=max_live_parameters,
        )
        self._eval_coordinator = PartitionedParameterCoordinator(
            prefetch_bucket_sz=0,
            max_reuse_distance_in_numel=max_reuse_distance,
            max_available_parameters_in_numel=max_live_parameters,
        )

    def get_param_coordinator(self, training):
        coordinator = self._train_coordinator if training else self._eval_coordinator
        return coordinator

    def _register_hooks_recursively(self, module):
        def _pre_forward_module_hook(module, *args):
            self.pre_sub_module_forward_function(module, torch.is_grad_enabled())

        def _post_forward_module_hook(module, input, output):
            self.post_sub_module_forward_function(module)

        self.forward_hooks.append(module.register_forward_pre_hook(_pre_forward_module_hook))
        self.forward_hooks.append(module.register_forward_hook(_post_forward_module_hook))

    @torch.no_grad()
    def pre_sub_module_forward_function(self, sub_module, grad_on):
        FWD_MODULE_STACK.append(sub_module)
        param_coordinator = self.get_param_coordinator(training=grad_on)
        param_coordinator.trace_prologue(sub_module)
        if param_coordinator.is_record_trace():
            param_coordinator.record_module(sub_module)
        param_coordinator.fetch_sub_module(sub_module, forward=True)

    @torch.no_grad()
    def post_sub_module_forward_function(self, sub_module):
        FWD_MODULE_STACK.pop()
        param_coordinator = self.get_param_coordinator(training=sub_module.training)
        param_coordinator.release_sub_module(sub_module)

    @instrument_w_nvtx
    @torch.no_grad()
    def pre_sub_module_backward_function(self, sub_module):
        assert sub_module.training, "backward pass is invalid for module in evaluation mode"
        param_coordinator = self.get_param_coordinator(training=True)
        param_coordinator.trace_prologue(sub_module)
        param_coordinator.fetch_sub_module(sub_module, forward=False)
