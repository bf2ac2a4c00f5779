import torch
import torch.nn as nn

from .args import LinearFwdArgs
from .function import _Linear


class Linear(nn.Module):
    def __init__(self, in_features, out_features, tp_group=None, sequence_parallel=False,
                 ub_overlap_ag=False, ub_overlap_rs=False, ub_name=None, bias=True):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None
        self.tp_group = tp_group
        self.sequence_parallel = sequence_parallel
        self.ub_overlap_ag = ub_overlap_ag
        self.ub_overlap_rs = ub_overlap_rs
        self.ub_name = ub_name
        self.fp8 = False

    def forward(self, inp: torch.Tensor) -> torch.Tensor:
        args = LinearFwdArgs(
            is_grad_enabled=torch.is_grad_enabled(),
            ub_overlap_ag_fprop=self.ub_overlap_ag,
            ub_overlap_rs_fprop=self.ub_overlap_rs,
            ub_name=self.ub_name,
            sequence_parallel=self.sequence_parallel,
            tp_group=self.tp_group,
            fp8=self.fp8,
        )
        if args.is_grad_enabled:
            return _Linear.apply(self.weight, inp, self.bias, args)
        return _Linear.forward(None, self.weight, inp, self.bias, args)
