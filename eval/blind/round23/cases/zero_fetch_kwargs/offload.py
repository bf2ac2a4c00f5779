# adapted from microsoft/DeepSpeed deepspeed/runtime/zero/parameter_offload.py
import torch

from deepspeed.accelerator import get_accelerator
from deepspeed.runtime.zero.partitioned_param_coordinator import InflightParamRegistry

from .coordinator import PartitionedParameterCoordinator

FWD_MODULE_STACK = list()


def _apply_forward_and_backward_to_tensors_only(module, forward_function, backward_function, outputs):
    if type(outputs) is tuple:
        return tuple(_apply_forward_and_backward_to_tensors_only(module, forward_function, backward_function, o)
                     for o in outputs)
    elif type(outputs) is torch.Tensor:
        forward_function(outputs)
        if outputs.requires_grad:
            outputs.register_hook(backward_function)
        return outputs
    return outputs


class DeepSpeedZeRoOffload(object):
    def __init__(self, module, timers, overlap_comm=True, prefetch_bucket_size=50000000,
                 max_reuse_distance=1000000000, max_live_parameters=1000000000):
        self.module = module
        self.timers = timers
        self._allgather_stream = get_accelerator().Stream() if overlap_comm else get_accelerator().default_stream()
        self.param_coordinator = PartitionedParameterCoordinator(
            prefetch_bucket_sz=int(prefetch_bucket_size),
            max_reuse_distance_in_numel=int(max_reuse_distance),
            max_available_parameters_in_numel=int(max_live_parameters),
            allgather_stream=self._allgather_stream,
            inflight_param_registry=InflightParamRegistry(),
            timers=timers,
        )
        self.forward_hooks = []
        self._register_hooks_recursively(self.module)

    def _register_hooks_recursively(self, module, count=[0]):
        my_count = count[0]
        module.id = my_count
        for child in module.children():
            count[0] = count[0] + 1
            self._register_hooks_recursively(child, count=count)

        def _pre_forward_module_hook(module, *args):
            self.param_coordinator.fetch_kwargs = {"prefetch": torch.is_grad_enabled()}
            self.pre_sub_module_forward_function(module)

        def _post_forward_module_hook(module, input, output):
            FWD_MODULE_STACK.pop()
            return _apply_forward_and_backward_to_tensors_only(module, lambda t: None, self._pre_backward_hook, output)

        self.forward_hooks.append(module.register_forward_pre_hook(_pre_forward_module_hook))
        self.forward_hooks.append(module.register_forward_hook(_post_forward_module_hook))

    def pre_sub_module_forward_function(self, sub_module):
        FWD_MODULE_STACK.append(sub_module)
        self.param_coordinator.fetch_sub_module(sub_module, forward=True)

    def _pre_backward_hook(self, grad):
        return grad
