# adapted from huggingface/accelerate src/accelerate/hooks.py
import functools
from typing import Mapping, Optional, Union

import torch
import torch.nn as nn

from .utils import find_device, named_module_tensors, send_to_device, set_module_tensor_to_device


class ModelHook:
    """
    Class attribute:
    - **no_grad** (`bool`, *optional*, defaults to `False`) -- Whether or not to execute the actual forward pass under
      the `torch.no_grad()` context manager.
    """

    no_grad = False

    def pre_forward(self, module, *args, **kwargs):
        return args, kwargs

    def post_forward(self, module, output):
        return output


def add_hook_to_module(module: nn.Module, hook: ModelHook, append: bool = False):
    old_forward = module.forward
    module._old_forward = old_forward
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
    def __init__(self, execution_device: Optional[Union[int, str, torch.device]] = None, offload: bool = False,
                 io_same_device: bool = False, weights_map: Optional[Mapping] = None, offload_buffers: bool = False,
                 place_submodules: bool = False):
        self.execution_device = execution_device
        self.offload = offload
        self.io_same_device = io_same_device
        self.weights_map = weights_map
        self.offload_buffers = offload_buffers
        self.place_submodules = place_submodules
        self.input_device = None

    @property
    def overlap_h2d(self) -> bool:
        # Overlap the weight upload with compute on a side stream while training.
        return self.offload and torch.is_grad_enabled()

    def pre_forward(self, module, *args, **kwargs):
        if self.io_same_device:
            self.input_device = find_device([args, kwargs])
        if self.offload:
            non_blocking = self.overlap_h2d
            for name, _ in named_module_tensors(module, include_buffers=self.offload_buffers,
                                                recurse=self.place_submodules, remove_non_persistent=True):
                value = self.weights_map[name]
                set_module_tensor_to_device(module, name, self.execution_device, value=value,
                                            non_blocking=non_blocking)
        return send_to_device(args, self.execution_device), send_to_device(kwargs, self.execution_device)

    def post_forward(self, module, output):
        if self.offload:
            for name, _ in named_module_tensors(module, include_buffers=self.offload_buffers,
                                                recurse=self.place_submodules, remove_non_persistent=True):
                set_module_tensor_to_device(module, name, "meta")
        if self.io_same_device and self.input_device is not None:
            output = send_to_device(output, self.input_device)
        return output
