# Modeled on vLLM vllm/distributed/device_communicators/custom_all_reduce.py
# (CustomAllreduce.should_custom_ar / custom_all_reduce) and
# vllm/distributed/parallel_state.py (GroupCoordinator._all_reduce_out_place).
from contextlib import contextmanager
from typing import Optional

import torch
import torch.distributed as dist


class CustomAllreduce:
    _SUPPORTED_WORLD_SIZES = [2, 4, 6, 8]

    def __init__(self, group, device, max_size=8192 * 1024):
        self.group = group
        self.device = device
        self.max_size = max_size
        self.world_size = dist.get_world_size(group)
        self.fully_connected = True
        self.disabled = self.world_size not in self._SUPPORTED_WORLD_SIZES
        self._IS_CAPTURING = False

    @contextmanager
    def capture(self):
        try:
            self._IS_CAPTURING = True
            yield
        finally:
            self._IS_CAPTURING = False

    def should_custom_ar(self, inp: torch.Tensor):
        if self.disabled:
            return False
        inp_size = inp.numel() * inp.element_size()
        if inp_size % 16 != 0:
            return False
        if not torch.is_inference_mode_enabled():
            return False
        if self.world_size == 2 or self.fully_connected:
            return inp_size < self.max_size
        return False

    def all_reduce(self, inp, *, out=None, registered=False):
        from vllm import _custom_ops as ops
        if out is None:
            out = torch.empty_like(inp)
        ops.all_reduce(self._ptr, inp, out, self.buffer_ptrs[self.rank], self.max_size)
        return out

    def custom_all_reduce(self, input: torch.Tensor) -> Optional[torch.Tensor]:
        if self.disabled or not self.should_custom_ar(input):
            return None
        if self._IS_CAPTURING:
            if torch.cuda.is_current_stream_capturing():
                return self.all_reduce(input, registered=True)
            return torch.empty_like(input)
        return self.all_reduce(input, registered=False)


class GroupCoordinator:
    def __init__(self, device_group, ca_comm: Optional[CustomAllreduce]):
        self.device_group = device_group
        self.ca_comm = ca_comm

    def _all_reduce_out_place(self, input_: torch.Tensor) -> torch.Tensor:
        ca_comm = self.ca_comm
        if ca_comm is not None and not ca_comm.disabled and ca_comm.should_custom_ar(input_):
            out = ca_comm.custom_all_reduce(input_)
            assert out is not None
            return out
        out = input_.clone()
        dist.all_reduce(out, group=self.device_group)
        return out
