from typing import Optional

import torch
import torch.nn as nn
from torch.distributed import ProcessGroup

from ._operation import linear_gather_forward, linear_with_async_comm, reduce_forward
from .parallel_module import ParallelModule


class Linear1D_Col(ParallelModule):
    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 dtype: torch.dtype = None, device: torch.device = None,
                 process_group: ProcessGroup = None, gather_output: bool = False,
                 seq_parallel_mode: Optional[str] = None, seq_parallel_dim: int = 1,
                 async_communication: bool = False, use_ring: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.in_features = in_features
        self.out_features = out_features
        self.gather_output = gather_output
        self.seq_parallel_mode = seq_parallel_mode
        self.seq_parallel_dim = seq_parallel_dim
        self.async_communication = async_communication
        self.use_ring = use_ring
        self.process_group = process_group
        tp_size = self._tp_world_size(process_group)
        self.weight = nn.Parameter(torch.empty(out_features // tp_size, in_features, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(out_features // tp_size, device=device, dtype=dtype)) if bias else None

    @staticmethod
    def from_native_module(module: nn.Linear, process_group=None, **kwargs) -> "Linear1D_Col":
        return Linear1D_Col(module.in_features, module.out_features, bias=module.bias is not None,
                            dtype=module.weight.dtype, device=module.weight.device,
                            process_group=process_group, **kwargs)

    def forward(self, input_: torch.Tensor):
        bias = self.bias
        if self.seq_parallel_mode == "split_gather":
            ring = self.use_ring and self._grad_on()
            output_parallel = linear_gather_forward(
                input_, self.weight, bias, self.process_group, dim=self.seq_parallel_dim, ring=ring
            )
        else:
            async_grad_allreduce = self.async_communication and self._grad_on()
            output_parallel = linear_with_async_comm(
                input_, self.weight, bias, self.process_group, async_grad_allreduce
            )
        return output_parallel


class Linear1D_Row(ParallelModule):
    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 dtype: torch.dtype = None, device: torch.device = None,
                 process_group: ProcessGroup = None, **kwargs):
        super().__init__(**kwargs)
        self.process_group = process_group
        tp_size = self._tp_world_size(process_group)
        self.weight = nn.Parameter(torch.empty(out_features, in_features // tp_size, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(out_features, device=device, dtype=dtype)) if bias else None

    @staticmethod
    def from_native_module(module: nn.Linear, process_group=None, **kwargs) -> "Linear1D_Row":
        return Linear1D_Row(module.in_features, module.out_features, bias=module.bias is not None,
                            dtype=module.weight.dtype, device=module.weight.device,
                            process_group=process_group, **kwargs)

    def forward(self, input_: torch.Tensor) -> torch.Tensor:
        output = reduce_forward(torch.nn.functional.linear(input_, self.weight), self.process_group)
        if self.bias is not None:
            output = output + self.bias
        return output
