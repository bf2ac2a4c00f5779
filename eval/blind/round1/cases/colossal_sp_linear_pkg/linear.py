"""Linear1D_Col / Linear1D_Row (cf. colossalai/shardformer/layer/linear.py), sequence-parallel paths only."""
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed import ProcessGroup

from colossalai.shardformer.layer.parallel_module import ParallelModule

from ._operation import linear_gather_forward_reducescatter_backward, reducescatter_forward_gather_backward


class _SeqParallelLinearBase(ParallelModule):

    @property
    def _grad_on(self) -> bool:
        return torch.is_grad_enabled()


class Linear1D_Col(_SeqParallelLinearBase):

    def __init__(self, in_features: int, out_features: int, bias: bool = True, process_group: ProcessGroup = None,
                 seq_parallel_mode: Optional[str] = "split_gather", seq_parallel_dim: int = 1,
                 overlap: bool = True, fp8_communication: bool = False):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.process_group = process_group
        self.seq_parallel_mode = seq_parallel_mode
        self.seq_parallel_dim = seq_parallel_dim
        self.overlap = overlap
        self.fp8_communication = fp8_communication
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None

    def forward(self, input_: torch.Tensor) -> torch.Tensor:
        assert input_.shape[-1] == self.weight.shape[-1]
        input_parallel = input_
        bias = self.bias
        if self.seq_parallel_mode == "split_gather":
            output_parallel = linear_gather_forward_reducescatter_backward(
                input_parallel,
                self.weight,
                bias,
                self.process_group,
                True,
                self.seq_parallel_dim,
                ring=self.overlap,
                grad_enabled=self._grad_on,
            )
        else:
            output_parallel = F.linear(input_parallel, self.weight, bias)
        return output_parallel


class Linear1D_Row(_SeqParallelLinearBase):

    def __init__(self, in_features: int, out_features: int, bias: bool = True, process_group: ProcessGroup = None,
                 seq_parallel_mode: Optional[str] = "split_gather", seq_parallel_dim: int = 1,
                 fp8_communication: bool = False):
        super().__init__()
        self.process_group = process_group
        self.seq_parallel_mode = seq_parallel_mode
        self.seq_parallel_dim = seq_parallel_dim
        self.fp8_communication = fp8_communication
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None

    def forward(self, input_: torch.Tensor) -> torch.Tensor:
        output_parallel = F.linear(input_, self.weight)
        if self.seq_parallel_mode == "split_gather":
            output = reducescatter_forward_gather_backward(
                output_parallel,
                self.process_group,
                self.seq_parallel_dim,
                fp8_communication=self.fp8_communication,
                grad_enabled=self._grad_on,
            )
        else:
            output = output_parallel
        if self.bias is not None:
            output = output + self.bias
        return output
