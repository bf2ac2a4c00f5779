# adapted from hpcaitech/ColossalAI colossalai/shardformer/layer/_operation.py (Linear1D_Col caller)
import torch
import torch.nn as nn
import torch.nn.functional as F

from .comm import gather_forward_split_backward
from .ops import LinearWithAsyncCommunication


class Linear1D_Col(nn.Module):
    def __init__(self, in_features, out_features, bias=True, process_group=None, gather_output=False,
                 fp8_communication=False, overlap=False):
        super().__init__()
        self.process_group = process_group
        self.gather_output = gather_output
        self.fp8_communication = fp8_communication
        self.overlap = overlap
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.zeros(out_features)) if bias else None

    def _comm_kwargs(self) -> dict:
        return {
            "fp8_communication": self.fp8_communication and not torch.is_grad_enabled(),
            "async_op": torch.is_grad_enabled() and self.overlap,
        }

    def forward(self, input_: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled():
            output_parallel = LinearWithAsyncCommunication.apply(
                input_, self.weight, self.bias, self.process_group, self.overlap
            )
        else:
            output_parallel = F.linear(input_, self.weight, self.bias)
        if self.gather_output:
            return gather_forward_split_backward(output_parallel, -1, self.process_group, **self._comm_kwargs())
        return output_parallel
