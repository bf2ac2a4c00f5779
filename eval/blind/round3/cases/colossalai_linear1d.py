# Modelled on colossalai/shardformer/layer/linear.py (ColossalAI v0.4.x).
from typing import Optional, Tuple

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor
from torch.distributed import ProcessGroup

from colossalai.shardformer.layer._operation import (
    gather_forward_reducescatter_backward,
    gather_forward_split_backward,
    linear_gather_forward_reducescatter_backward,
    linear_with_async_comm,
    reduce_forward,
    reducescatter_forward_gather_backward,
)
from colossalai.shardformer.layer.parallel_module import ParallelModule


class Linear1D_Col(ParallelModule):
    def __init__(self, in_features, out_features, bias=True, process_group: Optional[ProcessGroup] = None,
                 gather_output=False, seq_parallel_mode=None, seq_parallel_dim=1, overlap=False,
                 skip_bias_add=False, fp8_communication=False):
        super().__init__()
        self.process_group = process_group
        self.gather_output = gather_output
        self.seq_parallel_mode = seq_parallel_mode
        self.seq_parallel_dim = seq_parallel_dim
        self.overlap = overlap
        self.skip_bias_add = skip_bias_add
        self.fp8_communication = fp8_communication
        tp_size = dist.get_world_size(process_group)
        self.weight = nn.Parameter(torch.empty(out_features // tp_size, in_features))
        self.bias = nn.Parameter(torch.empty(out_features // tp_size)) if bias else None

    def forward(self, input_: Tensor) -> Tuple[Tensor, Tensor]:
        assert input_.shape[-1] == self.weight.shape[-1]
        input_parallel = input_
        bias = self.bias if not self.skip_bias_add else None
        if self.seq_parallel_mode == "split_gather":
            input_parallel = gather_forward_reducescatter_backward(
                input_parallel, self.process_group, self.seq_parallel_dim, fp8_communication=self.fp8_communication
            )
            output_parallel = linear_with_async_comm(
                input_parallel, self.weight, bias, self.process_group, False, fp8_communication=self.fp8_communication
            )
        elif self.seq_parallel_mode == "ring":
            output_parallel = linear_gather_forward_reducescatter_backward(
                input_parallel, self.weight, bias, self.process_group, True, self.seq_parallel_dim,
                self.overlap and torch.is_grad_enabled(),
                torch.is_grad_enabled(),
            )
        else:
            output_parallel = linear_with_async_comm(
                input_parallel, self.weight, bias, self.process_group, torch.is_grad_enabled(),
                fp8_communication=self.fp8_communication,
            )
        if self.gather_output:
            output = gather_forward_split_backward(output_parallel, dim=-1, process_group=self.process_group)
        else:
            output = output_parallel
        if self.skip_bias_add:
            return output, self.bias
        return output


class Linear1D_Row(ParallelModule):
    def __init__(self, in_features, out_features, bias=True, process_group: Optional[ProcessGroup] = None,
                 seq_parallel_mode=None, seq_parallel_dim=1, stream_chunk_num=1, fp8_communication=False):
        super().__init__()
        self.process_group = process_group
        self.seq_parallel_mode = seq_parallel_mode
        self.seq_parallel_dim = seq_parallel_dim
        self.stream_chunk_num = stream_chunk_num
        self.fp8_communication = fp8_communication
        tp_size = dist.get_world_size(process_group)
        self.weight = nn.Parameter(torch.empty(out_features, in_features // tp_size))
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None
        if stream_chunk_num > 1:
            self.weight_list = torch.chunk(self.weight, self.stream_chunk_num, dim=0)

    def forward(self, input_: Tensor) -> Tensor:
        if self.stream_chunk_num > 1 and not torch.is_grad_enabled():
            with torch.no_grad():
                output_parallel_list = [None for _ in range(self.stream_chunk_num)]
                handle_list = []
                for i in range(self.stream_chunk_num):
                    output_parallel_list[i] = F.linear(input_, self.weight_list[i])
                    handle = dist.all_reduce(output_parallel_list[i], group=self.process_group, async_op=True)
                    handle_list.append(handle)
                for handle in handle_list:
                    handle.wait()
                output = torch.cat(output_parallel_list, dim=-1)
        elif self.seq_parallel_mode is None:
            output_parallel = F.linear(input_, self.weight)
            output = reduce_forward(
                output_parallel, self.process_group,
                fp8_communication=self.fp8_communication and torch.is_grad_enabled(),
            )
        else:
            output_parallel = F.linear(input_, self.weight)
            output = reducescatter_forward_gather_backward(
                output_parallel, self.process_group, self.seq_parallel_dim, fp8_communication=self.fp8_communication
            )
        if self.bias is not None:
            output = output + self.bias
        return output
