"""Small helpers shared by the tensor-parallel layers (cf. megatron/core/utils.py)."""
import torch
from torch import is_grad_enabled as _torch_grad_enabled


class GlobalMemoryBuffer:
    """Global buffer to avoid dynamic memory allocations."""

    def __init__(self):
        self.buffer = {}

    def get_tensor(self, tensor_shape, dtype, name):
        required_len = 1
        for d in tensor_shape:
            required_len *= d
        if self.buffer.get((name, dtype), None) is None or self.buffer[(name, dtype)].numel() < required_len:
            self.buffer[(name, dtype)] = torch.empty(
                required_len, dtype=dtype, device=torch.cuda.current_device(), requires_grad=False
            )
        return self.buffer[(name, dtype)][0:required_len].view(*tensor_shape)


_GLOBAL_MEMORY_BUFFER = GlobalMemoryBuffer()


def get_global_memory_buffer() -> GlobalMemoryBuffer:
    return _GLOBAL_MEMORY_BUFFER


def autograd_recording() -> bool:
    """Whether the current forward is being recorded by autograd."""
    return _torch_grad_enabled()
