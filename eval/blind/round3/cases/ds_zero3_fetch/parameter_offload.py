# Modelled on deepspeed/runtime/zero/parameter_offload.py (DeepSpeed v0.12).
import torch

from deepspeed.runtime.zero.utils import apply_to_tensors_only

from .partitioned_param_coordinator import PartitionedParameterCoordinator


class PreBackwardFunctionForModule(torch.autograd.Function):
    @staticmethod
    def forward(ctx, outputs):
        ctx.module = outputs._ds_module
        ctx.pre_backward_function = outputs._ds_pre_backward_function
        return outputs.detach()

    @staticmethod
    def backward(ctx, *args):
        ctx.pre_backward_function(ctx.module)
        return args


class DeepSpeedZeRoOffload:
    def __init__(self, module, prefetch_bucket_size, max_live_parameters, max_reuse_distance):
        self.module = module
        self.param_coordinator = PartitionedParameterCoordinator(
            prefetch_bucket_sz=prefetch_bucket_size, max_reuse_distance_in_numel=max_reuse_distance,
            max_available_parameters_in_numel=max_live_parameters,
        )
        self.forward_hooks = []

    def _register_hooks_recursively(self, module):
        for child in module.children():
            self._register_hooks_recursively(child)

        def _pre_forward_module_hook(module, *args):
            self.pre_sub_module_forward_function(module, forward=torch._C.is_grad_enabled())

        def _post_forward_module_hook(module, input, output):
            if torch.is_grad_enabled():
                output = apply_to_tensors_only(
                    lambda t: PreBackwardFunctionForModule.apply(t) if t.requires_grad else t, output
                )
            self.post_sub_module_forward_function(module)
            return output

        self.forward_hooks.append(module.register_forward_pre_hook(_pre_forward_module_hook))
        self.forward_hooks.append(module.register_forward_hook(_post_forward_module_hook))

    @torch.no_grad()
    def pre_sub_module_forward_function(self, sub_module, forward):
        self.param_coordinator.trace_prologue(sub_module)
        if self.param_coordinator.is_record_trace():
            self.param_coordinator.record_module(sub_module)
        self.param_coordinator.fetch_sub_module(sub_module, forward=forward)

    @torch.no_grad()
    def post_sub_module_forward_function(self, sub_module):
        self.param_coordinator.release_sub_module(sub_module)
