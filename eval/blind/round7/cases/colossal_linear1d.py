from typing import Callable, List, Optional, Tuple, Union

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed import ProcessGroup

from colossalai.shardformer.layer._operation import (
    gather_forward_split_backward,
    linear_gather_forward_reducescatter_backward,
    linear_with_async_comm,
)


class Linear1D_Col(nn.Module):
    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 process_group: Optional[ProcessGroup] = None, gather_output: bool = False,
                 seq_parallel_mode: Optional[str] = None, seq_parallel_dim: int = 1,
                 async_communication: bool = False, skip_bias_add: bool = False):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.gather_output = gather_output
        self.seq_parallel_mode = seq_parallel_mode
        self.seq_parallel_dim = seq_parallel_dim
        self.async_communication = async_communication
        self.skip_bias_add = skip_bias_add
        self.process_group = process_group
        tp_size = dist.get_world_size(process_group)
        self.weight = nn.Parameter(torch.empty(out_features // tp_size, in_features))
        self.bias = nn.Parameter(torch.zeros(out_features // tp_size)) if bias else None

    def forward(self, input_: torch.Tensor) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        assert input_.shape[-1] == self.weight.shape[-1], (
            f"Invalid shapes in Linear1D_Col forward: input={input_.shape}, weight={self.weight.shape}."
        )
        input_parallel = input_
        bias = self.bias if not self.skip_bias_add else None
        grad_enabled = torch.is_grad_enabled()

        if self.seq_parallel_mode == "split_gather":
            output_parallel = linear_gather_forward_reducescatter_backward(
                input_parallel, self.weight, bias, self.process_group, True,
                self.seq_parallel_dim, ring=grad_enabled and self.seq_parallel_dim == 1,
            )
        elif self.seq_parallel_mode == "ring":
            output_parallel = linear_gather_forward_reducescatter_backward(
                input_parallel, self.weight, bias, self.process_group, True, self.seq_parallel_dim, ring=True,
            )
        else:
            output_parallel = linear_with_async_comm(
                input_parallel, self.weight, bias, self.process_group,
                self.async_communication and grad_enabled,
            )

        if self.gather_output:
            output = gather_forward_split_backward(output_parallel, dim=-1, process_group=self.process_group)
        else:
            output = output_parallel
        if self.skip_bias_add:
            return output, self.bias
        return output
