# adapted from huggingface/accelerate src/accelerate/hooks.py
import functools

import torch
import torch.nn as nn

from .utils import find_device, named_module_tensors, send_to_device, set_module_tensor_to_device


class ModelHook:
    no_grad = False

    def init_hook(self, module):
        return module

    def pre_forward(self, module, *args, **kwargs):
        return args, kwargs

    def post_forward(self, module, output):
        return output


def add_hook_to_module(module: nn.Module, hook: ModelHook, append: bool = False):
    old_forward = module.forward
    module._old_forward = old_forward
    module = hook.init_hook(module)
    module._hf_hook = hook

    def new_forward(module, *args, **kwargs):
        args, kwargs = module._hf_hook.pre_forward(module, *args, **kwargs)
        if module._hf_hook.no_grad:
            with torch.no_grad():
                output = module._old_forward(*args, **kwargs)
        else:
            output = module._old_forward(*args, **kwargs)
        return module._hf_hook.post_forward(module, output)

    module.forward = functools.update_wrapper(functools.partial(new_forward, module), old_forward)
    return module


class AlignDevicesHook(ModelHook):
    def __init__(self, execution_device=None, offload: bool = False, io_same_device: bool = False,
                 weights_map=None, offload_buffers: bool = False, place_submodules: bool = False):
        self.execution_device = execution_device
        self.offload = offload
        self.io_same_device = io_same_device
        self.weights_map = weights_map
        self.offload_buffers = offload_buffers
        self.place_submodules = place_submodules
        self.input_device = None

    def pre_forward(self, module, *args, **kwargs):
        if self.io_same_device:
            self.input_device = find_device([args, kwargs])
        if self.offload:
            for name, _ in named_module_tensors(
                module, include_buffers=self.offload_buffers, recurse=self.place_submodules,
            ):
                set_module_tensor_to_device(module, name, self.execution_device, value=self.weights_map[name])
        return send_to_device(args, self.execution_device), send_to_device(kwargs, self.execution_device)

    def post_forward(self, module, output):
        match (self.offload, torch.is_grad_enabled()):
            case (True, False):
                # nothing will need these weights for a backward pass: free them right away
                for name, _ in named_module_tensors(
                    module, include_buffers=self.offload_buffers, recurse=self.place_submodules,
                ):
                    set_module_tensor_to_device(module, name, "meta")
            case _:
                pass
        if self.io_same_device and self.input_device is not None:
            output = send_to_device(output, self.input_device)
        return output
