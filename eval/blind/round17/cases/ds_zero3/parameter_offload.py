# adapted from microsoft/DeepSpeed deepspeed/runtime/zero/parameter_offload.py
import torch

from deepspeed.utils.nvtx import instrument_w_nvtx

from .coordinator_registry import ParamCoordinatorRegistry

FWD_MODULE_STACK = list()


class DeepSpeedZeRoOffload(object):
    def __init__(self, module, prefetch_bucket_size, max_reuse_distance, max_live_parameters, allgather_stream):
        self.module = module
        self.forward_hooks = []
        self.backward_hooks = []
        self._coordinators = ParamCoordinatorRegistry(
            prefetch_bucket_size, max_reuse_distance, max_live_parameters, allgather_stream)
        self.setup_zero_stage3_hooks()

    def get_param_coordinator(self, training):
        return self._coordinators.get_param_coordinator(training)

    def setup_zero_stage3_hooks(self):
        self.hierarchy = 0

        #reset step at the end of every forward (inference) pass
        @instrument_w_nvtx
        def _end_of_forward_hook(module, *args):
            self.get_param_coordinator(training=torch._C.is_grad_enabled()).reset_step()

        self._register_hooks_recursively(self.module)
        self.module.register_forward_hook(_end_of_forward_hook)

    def _register_hooks_recursively(self, module, count=[0]):
        my_count = count[0]
        module.id = my_count
        for child in module.children():
            count[0] = count[0] + 1
            self._register_hooks_recursively(child, count=count)

        @instrument_w_nvtx
        def _pre_forward_module_hook(module, *args):
            self.pre_sub_module_forward_function(module, prefetch=torch.is_grad_enabled())

        def _alternate_post_backward_module_hook(module, inputs):
            module.ds_grads_remaining = 0

            def _run_before_forward_function(input):
                if input.requires_grad:
                    module.ds_grads_remaining += 1

            return _apply_forward_and_backward_to_tensors_only(module, _run_before_forward_function,
                                                               _run_after_backward_hook, inputs)

        # Pre forward hook
        self.forward_hooks.append(module.register_forward_pre_hook(_pre_forward_module_hook))
        # post backward hook
        self.backward_hooks.append(module.register_forward_pre_hook(_alternate_post_backward_module_hook))

    @torch.no_grad()
    def pre_sub_module_forward_function(self, sub_module, prefetch):
        global FWD_MODULE_STACK
        FWD_MODULE_STACK.append(sub_module)

        param_coordinator = self.get_param_coordinator(training=sub_module.training)
        if param_coordinator.is_record_trace():
            param_coordinator.record_module(sub_module)
        param_coordinator.fetch_sub_module(sub_module, forward=True, prefetch=prefetch)
