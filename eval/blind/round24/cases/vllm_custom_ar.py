# adapted from vllm-project/vllm vllm/distributed/device_communicators/custom_all_reduce.py
from contextlib import contextmanager

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroup

from vllm import _custom_ops as ops


def is_weak_contiguous(inp: torch.Tensor):
    return inp.is_contiguous() or (
        inp.storage().nbytes() - inp.storage_offset() * inp.element_size()
        == inp.numel() * inp.element_size()
    )


class CustomAllreduce:
    _SUPPORTED_WORLD_SIZES = [2, 4, 6, 8]

    def __init__(self, group: ProcessGroup, device, max_size=8192 * 1024) -> None:
        self._IS_CAPTURING = False
        self.disabled = True
        self.group = group
        self.world_size = dist.get_world_size(group=self.group)
        self.fully_connected = True
        self.max_size = max_size

    def should_custom_ar(self, inp: torch.Tensor):
        if self.disabled:
            return False
        if inp.requires_grad:
            return False
        inp_size = inp.numel() * inp.element_size()
        # custom allreduce requires input byte size to be multiples of 16
        if inp_size % 16 != 0:
            return False
        if not is_weak_contiguous(inp):
            return False
        if self.world_size == 2 or self.fully_connected:
            return inp_size < self.max_size
        return False

    def all_reduce(self, inp: torch.Tensor, *, out: torch.Tensor = None, registered: bool = False):
        if out is None:
            out = torch.empty_like(inp)
        if registered:
            ops.all_reduce(self._ptr, inp, out, 0, 0)
        else:
            ops.all_reduce(self._ptr, inp, out, self.buffer_ptrs[self.rank], self.max_size)
        return out

    def custom_all_reduce(self, input: torch.Tensor):
        """The main allreduce API that provides support for cuda graph."""
        if self.disabled or not self.should_custom_ar(input):
            return None
        use_registered = self._IS_CAPTURING and torch.is_grad_enabled()
        if use_registered:
            if torch.cuda.is_current_stream_capturing():
                return self.all_reduce(input, registered=True)
            return torch.empty_like(input)
        return self.all_reduce(input, registered=False)
