import torch

from deepspeed.runtime.zero.parameter_offload import PreBackwardFunctionForModule
from deepspeed.runtime.utils import apply_to_tensors_only


def register_zero3_hooks(module: torch.nn.Module, coordinator) -> None:
    def _pre_forward_module_hook(mod, *args):
        mod._ds_training_step = torch.is_grad_enabled()
        coordinator.fetch_sub_module(mod, forward=True)

    def _post_forward_module_hook(mod, inputs, outputs):
        coordinator.release_sub_module(mod)
        if mod._ds_training_step:
            outputs = apply_to_tensors_only(PreBackwardFunctionForModule.apply, outputs)
        return outputs

    for sub in module.modules():
        sub.register_forward_pre_hook(_pre_forward_module_hook)
        sub.register_forward_hook(_post_forward_module_hook)
