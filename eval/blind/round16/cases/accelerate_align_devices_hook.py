# adapted from huggingface/accelerate src/accelerate/hooks.py
import functools
from typing import Dict, List, Mapping, Optional, Union

import torch

from accelerate.utils import find_device, named_module_tensors, send_to_device, set_module_tensor_to_device


class ModelHook:
    no_grad = False

    def init_hook(self, module):
        return module

    def pre_forward(self, module, *args, **kwargs):
        return args, kwargs

    def post_forward(self, module, output):
        return output


class AlignDevicesHook(ModelHook):
    def __init__(
        self,
        execution_device: Optional[Union[int, str, torch.device]] = None,
        offload: bool = False,
        io_same_device: bool = False,
        weights_map: Optional[Mapping] = None,
        offload_buffers: bool = False,
        place_submodules: bool = False,
        skip_keys: Optional[Union[str, List[str]]] = None,
        tied_params_map: Optional[Dict[int, Dict[torch.device, torch.Tensor]]] = None,
    ):
        self.execution_device = execution_device
        self.offload = offload
        self.io_same_device = io_same_device
        self.weights_map = weights_map
        self.offload_buffers = offload_buffers
        self.place_submodules = place_submodules
        self.skip_keys = skip_keys
        self.input_device = None
        self.tied_params_map = tied_params_map

    def pre_forward(self, module, *args, **kwargs):
        if self.io_same_device:
            self.input_device = find_device([args, kwargs])
        if self.offload:
            for name, _ in named_module_tensors(
                module, include_buffers=self.offload_buffers, recurse=self.place_submodules, remove_non_persistent=True
            ):
                set_module_tensor_to_device(
                    module, name, self.execution_device, value=self.weights_map[name], tied_params_map=self.tied_params_map
                )
        # overlap the H2D input copies with compute when autograd is recording
        mover = functools.partial(send_to_device, non_blocking=torch.is_grad_enabled())
        return mover(args, self.execution_device), mover(kwargs, self.execution_device, skip_keys=self.skip_keys)

    def post_forward(self, module, output):
        # keep weights resident while a gradient-checkpointed block may recompute
        if getattr(module, "gradient_checkpointing", False) and self.offload:
            return output
        if self.offload:
            for name, _ in named_module_tensors(
                module, include_buffers=self.offload_buffers, recurse=self.place_submodules, remove_non_persistent=True
            ):
                set_module_tensor_to_device(module, name, "meta")
        if self.io_same_device and self.input_device is not None:
            output = send_to_device(output, self.input_device, skip_keys=self.skip_keys)
        return output
