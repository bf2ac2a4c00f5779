# adapted from huggingface/accelerate src/accelerate/hooks.py
import functools

import torch
import torch.nn as nn


class ModelHook:
    no_grad = False

    def pre_forward(self, module, *args, **kwargs):
        return args, kwargs

    def post_forward(self, module, output):
        return output


class GradModeHook(ModelHook):
    """Records the autograd mode of the current call on the module before its forward runs."""

    def pre_forward(self, module, *args, **kwargs):
        module._grad_active = torch.is_grad_enabled()
        return args, kwargs


def add_hook_to_module(module: nn.Module, hook: ModelHook, append: bool = False):
    old_forward = module.forward
    module._old_forward = old_forward
    module._hf_hook = hook

    def new_forward(module, *args, **kwargs):
        args, kwargs = module._hf_hook.pre_forward(module, *args, **kwargs)
        output = module._old_forward(*args, **kwargs)
        return module._hf_hook.post_forward(module, output)

    module.forward = functools.update_wrapper(functools.partial(new_forward, module), old_forward)
    return module
