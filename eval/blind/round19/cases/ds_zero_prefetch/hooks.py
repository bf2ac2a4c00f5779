# adapted from deepspeedai/DeepSpeed deepspeed/runtime/zero/parameter_offload.py
import torch

from deepspeed.utils import instrument_w_nvtx
from deepspeed.runtime.zero.utils import apply_to_tensors_only

from .state import FWD_STATE, FWD_MODULE_STACK
from .coordinator import PartitionedParameterCoordinator
from .backward_hooks import make_post_backward_module_hook


def _bwd_hook_unexpected_inputs_msg(value):
    return f"A module has unknown inputs or outputs type ({type(value)})"


class DeepSpeedZeRoOffload(object):

    def __init__(self, module, prefetch_bucket_size, max_reuse_distance, max_live_parameters):
        self.module = module
        self.forward_hooks = []
        self.backward_hooks = []
        self.param_coordinator = PartitionedParameterCoordinator(
            prefetch_bucket_sz=int(prefetch_bucket_size),
            max_reuse_distance_in_numel=int(max_reuse_distance),
            max_available_parameters_in_numel=int(max_live_parameters),
        )
        self.setup_zero_stage3_hooks()

    def get_param_coordinator(self):
        return self.param_coordinator

    def setup_zero_stage3_hooks(self):
        self.hierarchy = 0

        #reset step if in inference mode
        @instrument_w_nvtx
        def _start_of_forward_hook(module, *args):
            FWD_STATE.grad_enabled = torch.is_grad_enabled()
            self.get_param_coordinator().reset_step()

        self.fwd_pre_hook = self.module.register_forward_pre_hook(_start_of_forward_hook)
        self._register_deepspeed_module(self.module)
        FWD_MODULE_STACK.append(self.module)

    def _register_deepspeed_module(self, module, count=[0]):
        module.ds_id = count[0]
        for child in module.children():
            count[0] = count[0] + 1
            self._register_deepspeed_module(child, count=count)

        @torch.compiler.disable
        def _pre_forward_module_hook(module, *args):
            self.pre_sub_module_forward_function(module)

        self.forward_hooks.append(module.register_forward_pre_hook(_pre_forward_module_hook))
        self.backward_hooks.append(
            module.register_forward_pre_hook(
                make_post_backward_module_hook(apply_to_tensors_only, _bwd_hook_unexpected_inputs_msg)))

    @torch.no_grad()
    def pre_sub_module_forward_function(self, sub_module):
        FWD_MODULE_STACK.append(sub_module)
        param_coordinator = self.get_param_coordinator()
        param_coordinator.fetch_sub_module(sub_module, forward=True)
