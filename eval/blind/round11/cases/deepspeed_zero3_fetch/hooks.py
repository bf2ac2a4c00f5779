# Adapted from deepspeedai/DeepSpeed deepspeed/runtime/zero/parameter_offload.py
# (DeepSpeedZeRoOffload._register_hooks_recursively, pre/post forward module hooks).
import torch

from deepspeed.runtime.zero.parameter_offload import PostBackwardFunctionModule, _apply_to_tensors_only


def register_zero3_hooks(module: torch.nn.Module, coordinator):
    def _pre_forward_module_hook(submodule, *args):
        submodule._ds_grad_mode = torch.is_grad_enabled()
        coordinator.fetch_sub_module(submodule, forward=True)

    def _post_forward_module_hook(submodule, input, output):
        coordinator.release_sub_module(submodule, forward=True)
        if getattr(submodule, "_ds_grad_mode", False):
            output = _apply_to_tensors_only(PostBackwardFunctionModule.apply, output)
        return output

    for child in module.modules():
        child.register_forward_pre_hook(_pre_forward_module_hook)
        child.register_forward_hook(_post_forward_module_hook)
