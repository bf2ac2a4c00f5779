# adapted from huggingface/accelerate src/accelerate/hooks.py
from typing import Mapping, Optional

import torch

from accelerate.utils import find_device, named_module_tensors, send_to_device, set_module_tensor_to_device

from .offload import load_module_weights, prefetch_next_module
from .state import get_forward_state


class ModelHook:
    def pre_forward(self, module, *args, **kwargs):
        return args, kwargs

    def post_forward(self, module, output):
        return output


class AlignDevicesHook(ModelHook):
    def __init__(self, execution_device=None, offload: bool = False, io_same_device: bool = False,
                 weights_map: Optional[Mapping] = None, offload_buffers: bool = False,
                 place_submodules: bool = False, skip_keys=None, next_module=None):
        self.execution_device = execution_device
        self.offload = offload
        self.io_same_device = io_same_device
        self.weights_map = weights_map
        self.offload_buffers = offload_buffers
        self.place_submodules = place_submodules
        self.skip_keys = skip_keys
        self.next_module = next_module
        self.input_device = None

    def pre_forward(self, module, *args, **kwargs):
        get_forward_state().grad_enabled = torch.is_grad_enabled()
        if self.io_same_device:
            self.input_device = find_device([args, kwargs])
        if self.offload:
            load_module_weights(self, module)
            prefetch_next_module(self, self.next_module)

        return send_to_device(args, self.execution_device), send_to_device(
            kwargs, self.execution_device, skip_keys=self.skip_keys
        )

    def post_forward(self, module, output):
        if self.offload:
            for name, _ in named_module_tensors(
                module,
                include_buffers=self.offload_buffers,
                recurse=self.place_submodules,
                remove_non_persistent=True,
            ):
                set_module_tensor_to_device(module, name, "meta")
        if self.io_same_device and self.input_device is not None:
            output = send_to_device(output, self.input_device, skip_keys=self.skip_keys)
        return output
