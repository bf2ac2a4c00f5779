import torch
import torch.nn as nn

from ._operation import linear_gather_forward_reducescatter_backward, linear_with_async_comm, _gather
from .grad_context import with_autograd_state


class Linear1D_Col(nn.Module):
    def __init__(self, in_features, out_features, bias=True, process_group=None, gather_output=False,
                 seq_parallel_mode=None, seq_parallel_dim=1, overlap=True):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.gather_output = gather_output
        self.seq_parallel_mode = seq_parallel_mode
        self.seq_parallel_dim = seq_parallel_dim
        self.overlap = overlap
        self.process_group = process_group
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None

    @with_autograd_state
    def forward(self, input_: torch.Tensor, grad_enabled: bool = True):
        bias = self.bias
        # ring all-gather/matmul overlap only in training steps
        use_ring = self.seq_parallel_mode == "ring" and grad_enabled
        if self.seq_parallel_mode in ("split_gather", "ring"):
            output_parallel = linear_gather_forward_reducescatter_backward(
                input_, self.weight, bias, self.process_group, True, self.seq_parallel_dim, ring=use_ring
            )
        else:
            output_parallel = linear_with_async_comm(
                input_, self.weight, bias, self.process_group, self.overlap and grad_enabled
            )
        if grad_enabled and self.weight.requires_grad and not hasattr(self.weight, "_tp_hook"):
            self.weight._tp_hook = self.weight.register_hook(lambda g: g)
        gather = self.gather_output or not grad_enabled
        if gather:
            output = _gather(output_parallel, -1, self.process_group)
        else:
            output = output_parallel
        return output
