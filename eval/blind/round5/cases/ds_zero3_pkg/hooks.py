import torch

from deepspeed.runtime.zero.parameter_offload import PostBackwardFunctionModule, _apply_to_tensors_only

from .coordinator import PartitionedParameterCoordinator


class DeepSpeedZeRoOffload:
    def __init__(self, module, prefetch_bucket_size, max_live_parameters):
        self.module = module
        self.param_coordinator = PartitionedParameterCoordinator(prefetch_bucket_size, max_live_parameters)
        self.forward_hooks = []

    def setup_zero_stage3_hooks(self):
        for m in self.module.modules():
            self.forward_hooks.append(m.register_forward_pre_hook(self._pre_forward_module_hook))
            self.forward_hooks.append(m.register_forward_hook(self._post_forward_module_hook))

    def _pre_forward_module_hook(self, module, *args):
        in_training_step = torch.is_grad_enabled()
        self.pre_sub_module_forward_function(module, in_training_step)

    @torch.no_grad()
    def pre_sub_module_forward_function(self, sub_module, in_training_step):
        self.param_coordinator.trace_prologue(sub_module)
        if self.param_coordinator.is_record_trace():
            self.param_coordinator.record_module(sub_module)
        self.param_coordinator.fetch_sub_module(sub_module, forward=in_training_step)

    def _post_forward_module_hook(self, module, input, output):
        self.param_coordinator.release_sub_module(module)
        # the post-backward re-partition hook only fires if autograd will run backward
        if not torch.is_grad_enabled():
            return output
        if not hasattr(module, "post_bwd_fn"):
            module.post_bwd_fn = PostBackwardFunctionModule
        return _apply_to_tensors_only(module.post_bwd_fn.apply, output)
