# SPDX-License-Identifier: Apache-2.0
"""Stubs for the custom one-shot/two-shot all-reduce and the pynccl wrapper (cf. vllm/distributed/device_communicators)."""
from typing import Optional

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroup

from vllm import _custom_ops as ops


class CustomAllreduce:
    _SUPPORTED_WORLD_SIZES = [2, 4, 6, 8]

    def __init__(self, group: ProcessGroup, device, max_size: int = 8192 * 1024) -> None:
        self.group = group
        self.device = device
        self.max_size = max_size
        self.world_size = dist.get_world_size(group=self.group)
        self.disabled = self.world_size not in self._SUPPORTED_WORLD_SIZES
        self.fully_connected = True
        self._ptr = ops.init_custom_ar([], torch.empty(0), 0, self.fully_connected) if not self.disabled else 0
        self.buffer_ptrs = []

    def should_custom_ar(self, inp: torch.Tensor) -> bool:
        if self.disabled:
            return False
        inp_size = inp.numel() * inp.element_size()
        if inp_size % 16 != 0:
            return False
        if self.world_size == 2 or self.fully_connected:
            return inp_size < self.max_size
        return False

    def custom_all_reduce(self, input: torch.Tensor) -> Optional[torch.Tensor]:
        out = torch.empty_like(input)
        ops.all_reduce(self._ptr, input, out, self.buffer_ptrs[0], self.max_size)
        return out


class PyNcclCommunicator:

    def __init__(self, group: ProcessGroup, device) -> None:
        self.group = group
        self.device = device
        self.disabled = dist.get_world_size(group) == 1

    def all_gather(self, output_tensor: torch.Tensor, input_tensor: torch.Tensor, stream=None):
        from vllm.distributed.device_communicators.pynccl_wrapper import NCCLLibrary

        NCCLLibrary().ncclAllGather(input_tensor, output_tensor, stream=stream)
