# Modelled on DeepSpeed deepspeed/runtime/zero/parameter_offload.py
import torch

from deepspeed.runtime.zero.parameter_offload import _apply_forward_and_backward_to_tensors_only
from deepspeed.utils import instrument_w_nvtx

from .partitioned_param_coordinator import PartitionedParameterCoordinator

FWD_MODULE_STACK = list()


class DeepSpeedZeRoOffload(object):
    def __init__(self, module, timers, ds_config, prefetch_bucket_size=50_000_000, max_reuse_distance=1_000_000_000,
                 max_live_parameters=1_000_000_000, zero_quantized_weights=False):
        self.module = module
        self.param_coordinator = PartitionedParameterCoordinator(
            prefetch_bucket_sz=prefetch_bucket_size,
            max_reuse_distance_in_numel=max_reuse_distance,
            max_available_parameters_in_numel=max_live_parameters,
            allgather_stream=torch.cuda.Stream(),
            zero_quantized_weights=zero_quantized_weights,
        )
        self.forward_hooks = []
        self.backward_hooks = []

    def get_param_coordinator(self):
        return self.param_coordinator

    def _register_deepspeed_module(self, module, count=[0]):
        my_count = count[0]
        module.ds_id = my_count
        for child in module.children():
            count[0] = count[0] + 1
            self._register_deepspeed_module(child, count=count)

        @torch.compiler.disable
        def _pre_forward_module_hook(module, *args):
            # pre_sub_module_forward_function runs under @torch.no_grad(); remember the caller's mode
            module._ds_fwd_grad_enabled = torch.is_grad_enabled()
            self.pre_sub_module_forward_function(module)

        @instrument_w_nvtx
        def _post_forward_module_hook(module, input, output):
            FWD_MODULE_STACK.pop()
            self.post_sub_module_forward_function(module)

        def _pre_backward_module_hook(module, inputs, output):
            if not torch.is_grad_enabled():
                return output

            def _run_before_backward_function(sub_module):
                if sub_module.applied_pre_backward_ref_cnt > 0:
                    self.pre_sub_module_backward_function(sub_module)
                    sub_module.applied_pre_backward_ref_cnt -= 1

            return _apply_forward_and_backward_to_tensors_only(
                module, module.pre_bwd_fn.apply, _run_before_backward_function, output
            )

        self.forward_hooks.append(module.register_forward_pre_hook(_pre_forward_module_hook))
        self.forward_hooks.append(module.register_forward_hook(_post_forward_module_hook))
        self.backward_hooks.append(module.register_forward_hook(_pre_backward_module_hook))

    @torch.no_grad()
    def pre_sub_module_forward_function(self, sub_module):
        FWD_MODULE_STACK.append(sub_module)
        param_coordinator = self.get_param_coordinator()
        param_coordinator.trace_prologue(sub_module)
        if param_coordinator.is_record_trace():
            param_coordinator.record_module(sub_module)
        param_coordinator.fetch_sub_module(sub_module, forward=True)

    @torch.no_grad()
    def post_sub_module_forward_function(self, sub_module):
        self.get_param_coordinator().release_sub_module(sub_module, forward=True)

    @torch.no_grad()
    def pre_sub_module_backward_function(self, sub_module):
        self.get_param_coordinator().fetch_sub_module(sub_module, forward=False)
