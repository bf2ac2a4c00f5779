"""Module hooks that drive parameter fetch/release (modelled on deepspeed/runtime/zero/parameter_offload.py)."""
import torch

from deepspeed.runtime.utils import apply_to_tensors_only
from deepspeed.runtime.zero.parameter_offload import PreBackwardFunctionForModule, _apply_forward_and_backward_to_tensors_only

from .coordinator import PartitionedParameterCoordinator, iter_params

FWD_MODULE_STACK = list()


class ZeROOffloadHooks:

    def __init__(self, module: torch.nn.Module, coordinator: PartitionedParameterCoordinator):
        self.module = module
        self.param_coordinator = coordinator
        self.forward_hooks = []

    def setup_zero_stage3_hooks(self):
        for m in self.module.modules():
            self.forward_hooks.append(m.register_forward_pre_hook(self._pre_forward_module_hook))
            self.forward_hooks.append(m.register_forward_hook(self._post_forward_module_hook))

    def _pre_forward_module_hook(self, module, *args):
        grad_mode = torch._C.is_grad_enabled()
        self.pre_sub_module_forward_function(module, grad_mode)

    def _post_forward_module_hook(self, module, input, output):
        if torch._C.is_grad_enabled():
            output = apply_to_tensors_only(
                lambda t: PreBackwardFunctionForModule.apply(module, self._run_before_backward_function, t), output
            )
        self.post_sub_module_forward_function(module)
        return output

    @torch.no_grad()
    def pre_sub_module_forward_function(self, sub_module, grad_mode):
        FWD_MODULE_STACK.append(sub_module)
        param_coordinator = self.param_coordinator
        param_coordinator.trace_prologue(sub_module)
        if param_coordinator.is_record_trace():
            param_coordinator.record_module(sub_module)
        param_coordinator.fetch_sub_module(sub_module, forward=True, grad_mode=grad_mode)

    @torch.no_grad()
    def post_sub_module_forward_function(self, sub_module):
        FWD_MODULE_STACK.pop()
        self.param_coordinator.release_sub_module(sub_module, forward=True)

    def _run_before_backward_function(self, sub_module):
        self.param_coordinator.fetch_sub_module(sub_module, forward=False, grad_mode=True)
