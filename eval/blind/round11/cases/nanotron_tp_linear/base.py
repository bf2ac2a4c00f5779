# Adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/nn.py (shared TP linear attributes).
import torch
import torch.distributed as dist
from torch import nn

from nanotron.parallel.tensor_parallel.enum import TensorParallelLinearMode


class _TensorParallelLinearBase(nn.Linear):
    def __init__(self, in_features, out_features, pg: dist.ProcessGroup, mode: TensorParallelLinearMode,
                 bias=True, device=None, dtype=None, async_communication: bool = False):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.pg = pg
        self.mode = mode
        self.async_communication = async_communication

    @property
    def grad_enabled(self) -> bool:
        return torch.is_grad_enabled()

    def use_async_communication(self) -> bool:
        return self.async_communication and self.grad_enabled
