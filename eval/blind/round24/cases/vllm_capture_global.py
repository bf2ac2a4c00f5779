# adapted from vllm-project/vllm vllm/distributed/device_communicators/custom_all_reduce.py
from contextlib import contextmanager

import torch
import torch.distributed as dist

from vllm import _custom_ops as ops

# Whether the one-shot custom allreduce kernel may be used; refreshed on capture.
_ALLOW_CUSTOM_AR = True


class CustomAllreduce:
    def __init__(self, group, device, max_size=8192 * 1024) -> None:
        self._IS_CAPTURING = False
        self.disabled = True
        self.group = group
        self.max_size = max_size

    @contextmanager
    def capture(self):
        global _ALLOW_CUSTOM_AR
        prev = _ALLOW_CUSTOM_AR
        try:
            self._IS_CAPTURING = True
            _ALLOW_CUSTOM_AR = torch.is_grad_enabled()
            if torch.is_inference_mode_enabled():
                assert not torch.cuda.is_current_stream_capturing(), "capture must start outside the stream"
            yield
        finally:
            self._IS_CAPTURING = False
            _ALLOW_CUSTOM_AR = prev
            if not self.disabled:
                self.register_graph_buffers()

    def register_graph_buffers(self):
        handle, offset = ops.get_graph_buffer_ipc_meta(self._ptr)
        ops.register_graph_buffers(self._ptr, [handle], [offset])

    def should_custom_ar(self, inp: torch.Tensor):
        inp_size = inp.numel() * inp.element_size()
        return inp_size % 16 == 0 and inp_size < self.max_size

    def custom_all_reduce(self, input: torch.Tensor):
        if self.disabled or not _ALLOW_CUSTOM_AR or not self.should_custom_ar(input):
            return None
        out = torch.empty_like(input)
        ops.all_reduce(self._ptr, input, out, self.buffer_ptrs[self.rank], self.max_size)
        return out
