# Adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/linear.py (Linear.forward).
import torch

from .config import make_overlap_config
from .linear_fn import _Linear


class Linear(torch.nn.Module):
    def __init__(self, in_features, out_features, tp_group=None, parallel_mode="column", sequence_parallel=False,
                 ub_overlap_ag_fprop=False, ub_overlap_rs_fprop=False, ub_name="proj"):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(out_features, in_features))
        self.bias = None
        self.tp_group = tp_group
        self.parallel_mode = parallel_mode
        self.sequence_parallel = sequence_parallel
        self.ub_overlap_ag_fprop = ub_overlap_ag_fprop
        self.ub_overlap_rs_fprop = ub_overlap_rs_fprop
        self.ub_name = ub_name

    def forward(self, inp):
        cfg = make_overlap_config(self)
        return _Linear.apply(self.weight, inp, self.bias, cfg, self.parallel_mode, self.sequence_parallel,
                             self.tp_group)
