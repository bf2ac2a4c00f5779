# adapted from hpcaitech/ColossalAI colossalai/shardformer/layer/linear.py
import torch
import torch.nn as nn
from torch import Tensor

from ._operation import gather_forward_split_backward, linear_with_async_comm


class Linear1D_Col(nn.Module):
    def __init__(self, in_features: int, out_features: int, bias: bool = True, process_group=None,
                 gather_output: bool = False, seq_parallel_mode=None, fp8_communication: bool = False):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.gather_output = gather_output
        self.seq_parallel_mode = seq_parallel_mode
        self.process_group = process_group
        self.fp8_communication = fp8_communication
        self.async_communication = True
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None

    def forward(self, input_: Tensor) -> Tensor:
        assert (
            input_.shape[-1] == self.weight.shape[-1]
        ), "Invalid shapes in Linear1D_Col forward: input={}, weight={}. Expected last dim of input {}.".format(
            input_.shape, self.weight.shape, self.weight.shape[-1]
        )

        # Set up backprop all-reduce.
        input_parallel = input_
        bias = self.bias

        output_parallel = linear_with_async_comm(
            input_parallel,
            self.weight,
            bias,
            self.process_group,
            self.async_communication and torch.is_grad_enabled(),
            fp8_communication=self.fp8_communication,
        )

        if self.gather_output:
            # All-gather across the partitions.
            gather_kwargs = {
                "process_group": self.process_group,
                "fp8_communication": self.fp8_communication,
                "async_op": torch.is_grad_enabled(),
            }
            output = gather_forward_split_backward(output_parallel, dim=-1, **gather_kwargs)
        else:
            output = output_parallel

        return output
