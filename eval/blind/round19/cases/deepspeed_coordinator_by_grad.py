# adapted from deepspeedai/DeepSpeed deepspeed/runtime/zero/parameter_offload.py
import torch

from deepspeed.runtime.zero.partitioned_param_coordinator import PartitionedParameterCoordinator
from deepspeed.utils import instrument_w_nvtx

FWD_MODULE_STACK = list()


class DeepSpeedZeRoOffload(object):

    def __init__(self, module, prefetch_bucket_size, max_live_parameters, max_reuse_distance, timers=None):
        self.module = module
        self.forward_hooks = []
        self.backward_hooks = []
        self.param_coordinators = {}
        self._prefetch_bucket_sz = int(prefetch_bucket_size)
        self._max_reuse_distance_in_numel = int(max_reuse_distance)
        self._max_available_parameters_in_numel = int(max_live_parameters)
        self.__allgather_stream = None
        self.setup_zero_stage3_hooks()

    def get_param_coordinator(self, training):
        key = "train" if training else "eval"
        if key not in self.param_coordinators:
            self.param_coordinators[key] = PartitionedParameterCoordinator(
                prefetch_bucket_sz=self._prefetch_bucket_sz,
                max_reuse_distance_in_numel=self._max_reuse_distance_in_numel,
                max_available_parameters_in_numel=self._max_available_parameters_in_numel,
                allgather_stream=self.__allgather_stream,
            )
        return self.param_coordinators[key]

    def setup_zero_stage3_hooks(self):
        self.hierarchy = 0

        #reset step if in inference mode
        @instrument_w_nvtx
        def _start_of_forward_hook(module, *args):
            self.get_param_coordinator(training=torch.is_grad_enabled()).reset_step()

        self.fwd_pre_hook = self.module.register_forward_pre_hook(_start_of_forward_hook)
        self._register_deepspeed_module(self.module)
        global FWD_MODULE_STACK
        FWD_MODULE_STACK.append(self.module)

    def _register_deepspeed_module(self, module, count=[0]):
        my_count = count[0]
        module.ds_id = my_count
        for child in module.children():
            count[0] = count[0] + 1
            self._register_deepspeed_module(child, count=count)

        @torch.compiler.disable
        def _pre_forward_module_hook(module, *args):
            self.pre_sub_module_forward_function(module)

        def _alternate_post_backward_module_hook(module, inputs):
            module.ds_grads_remaining = 0

            def _run_after_backward_hook(*unused):
                module.ds_grads_remaining = module.ds_grads_remaining - 1
                if module.ds_grads_remaining == 0:
                    self.post_sub_module_backward_function(module)

            def _run_before_forward_function(input):
                if input.requires_grad:
                    module.ds_grads_remaining += 1

            return _apply_forward_and_backward_to_tensors_only(module, _run_before_forward_function,
                                                               _run_after_backward_hook, inputs)

        @torch.compiler.disable
        def _post_backward_module_hook(module, inputs):
            module.ds_grads_remaining = 0
            # no autograd graph -> the post-backward function would never fire
            if not torch.is_grad_enabled():
                return inputs
            return apply_to_tensors_only(module.post_bwd_fn.apply,
                                         inputs,
                                         warning_msg_fn=_bwd_hook_unexpected_inputs_msg)

        self.forward_hooks.append(module.register_forward_pre_hook(_pre_forward_module_hook))
        self.backward_hooks.append(module.register_forward_pre_hook(_post_backward_module_hook))

    @torch.no_grad()
    def pre_sub_module_forward_function(self, sub_module):
        global FWD_MODULE_STACK
        FWD_MODULE_STACK.append(sub_module)

        param_coordinator = self.get_param_coordinator(training=sub_module.training)
        param_coordinator.trace_prologue(sub_module)
        if param_coordinator.is_record_trace():
            param_coordinator.record_module(sub_module)
        param_coordinator.fetch_sub_module(sub_module, forward=True)

    @torch.no_grad()
    def post_sub_module_forward_function(self, sub_module):
        param_coordinator = self.get_param_coordinator(training=sub_module.training)
        param_coordinator.release_sub_module(sub_module, forward=True)
