from functools import partial

import torch
import torch.distributed as dist
import torch.nn as nn

from colossalai.shardformer.layer._operation import (
    gather_forward_split_backward,
    linear_gather_forward_reducescatter_backward,
    linear_with_async_comm,
)


class Linear1D_Col(nn.Module):

    def __init__(self, in_features, out_features, bias=True, process_group=None, gather_output=False,
                 seq_parallel_mode=None, seq_parallel_dim=1, overlap=False, ring_overlap=False,
                 fp8_communication=False, dtype=None, device=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.process_group = process_group
        self.gather_output = gather_output
        self.seq_parallel_mode = seq_parallel_mode
        self.seq_parallel_dim = seq_parallel_dim
        self.overlap = overlap
        self.ring_overlap = ring_overlap
        self.fp8_communication = fp8_communication
        tp_size = dist.get_world_size(process_group)
        self.weight = nn.Parameter(torch.empty(out_features // tp_size, in_features, dtype=dtype, device=device))
        self.bias = nn.Parameter(torch.empty(out_features // tp_size, dtype=dtype, device=device)) if bias else None

    def _sp_linear(self, grad_enabled):
        return partial(
            linear_gather_forward_reducescatter_backward,
            process_group=self.process_group,
            async_grad_reduce_scatter=True,
            dim=self.seq_parallel_dim,
            ring=self.ring_overlap and grad_enabled,
            fp8_communication=self.fp8_communication,
        )

    def forward(self, input_):
        assert input_.shape[-1] == self.weight.shape[-1]
        grad_enabled = torch.is_grad_enabled()
        bias = self.bias
        if self.seq_parallel_mode == "split_gather":
            output_parallel = self._sp_linear(grad_enabled)(input_, self.weight, bias)
        else:
            output_parallel = linear_with_async_comm(
                input_,
                self.weight,
                bias,
                self.process_group,
                async_grad_allreduce=self.overlap and grad_enabled,
                fp8_communication=self.fp8_communication,
            )
        if self.gather_output:
            output = gather_forward_split_backward(output_parallel, dim=-1, process_group=self.process_group,
                                                   fp8_communication=self.fp8_communication)
        else:
            output = output_parallel
        return output
