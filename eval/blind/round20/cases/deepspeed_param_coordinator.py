# adapted from deepspeedai/DeepSpeed deepspeed/runtime/zero/parameter_offload.py
import torch

from deepspeed.runtime.zero.partitioned_param_coordinator import PartitionedParameterCoordinator
from deepspeed.runtime.zero.utils import apply_to_tensors_only, is_zero_param
from deepspeed.utils import instrument_w_nvtx

FWD_MODULE_STACK = list()


class DeepSpeedZeRoOffload(object):

    def __init__(self, module, prefetch_bucket_size, max_reuse_distance_in_numel, max_live_parameters,
                 timers=None, zero_quantized_weights=False, zero_quantized_nontrainable_weights=False):
        self.module = module
        self.timers = timers
        self.param_coordinators = {}
        self._prefetch_bucket_sz = int(prefetch_bucket_size)
        self._max_reuse_distance_in_numel = int(max_reuse_distance_in_numel)
        self._max_available_parameters_in_numel = int(max_live_parameters)
        self.zero_quantized_weights = zero_quantized_weights
        self.zero_quantized_nontrainable_weights = zero_quantized_nontrainable_weights
        self.forward_hooks = []
        self.backward_hooks = []
        self.setup_zero_stage3_hooks()

    def get_param_coordinator(self, training):
        if training not in self.param_coordinators:
            self.param_coordinators[training] = PartitionedParameterCoordinator(
                prefetch_bucket_sz=self._prefetch_bucket_sz,
                max_reuse_distance_in_numel=self._max_reuse_distance_in_numel,
                max_available_parameters_in_numel=self._max_available_parameters_in_numel,
                allgather_stream=torch.cuda.Stream(),
                inflight_param_registry={},
                prefetch_nvtx=True,
                timers=self.timers,
                zero_quantized_weights=self.zero_quantized_weights,
                zero_quantized_nontrainable_weights=self.zero_quantized_nontrainable_weights,
            )
        return self.param_coordinators[training]

    def setup_zero_stage3_hooks(self):
        self.hierarchy = 0

        @instrument_w_nvtx
        @torch.no_grad()
        def _start_of_forward_hook(module, *args):
            # the trace recorded for this pass decides what gets prefetched next forward
            self.get_param_coordinator(torch.is_grad_enabled()).reset_step()

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

        def _post_forward_module_hook(module, input, output):
            global FWD_MODULE_STACK
            FWD_MODULE_STACK.pop()
            self.post_sub_module_forward_function(module)

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

        self.forward_hooks.append(module.register_forward_pre_hook(_pre_forward_module_hook))
        self.forward_hooks.append(module.register_forward_hook(_post_forward_module_hook))
        self.backward_hooks.append(module.register_forward_pre_hook(_alternate_post_backward_module_hook))

    @torch.no_grad()
    def pre_sub_module_forward_function(self, sub_module):
        global FWD_MODULE_STACK
        FWD_MODULE_STACK.append(sub_module)
        param_coordinator = self.get_param_coordinator(self.module.training)
        param_coordinator.trace_prologue(sub_module)
        if param_coordinator.is_record_trace():
            param_coordinator.record_module(sub_module)
        param_coordinator.fetch_sub_module(sub_module, forward=True)

    @torch.no_grad()
    def post_sub_module_forward_function(self, sub_module):
        param_coordinator = self.get_param_coordinator(self.module.training)
        param_coordinator.release_sub_module(sub_module, forward=True)

    @torch.no_grad()
    def post_sub_module_backward_function(self, sub_module):
        self.get_param_coordinator(self.module.training).release_sub_module(sub_module, forward=False)
