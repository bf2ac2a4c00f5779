"""Linear module modelled on transformer_engine/pytorch/module/linear.py (Linear.forward)."""
import torch

from .function import _Linear


class Linear(torch.nn.Module):
    def __init__(self, in_features, out_features, tp_group=None, tp_size=1, sequence_parallel=False,
                 parallel_mode="row", ub_overlap_rs=False, ub_name="proj", fsdp_group=None):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(out_features, in_features))
        self.bias = torch.nn.Parameter(torch.empty(out_features))
        self.tp_group = tp_group
        self.tp_size = tp_size
        self.sequence_parallel = sequence_parallel
        self.parallel_mode = parallel_mode
        self.ub_overlap_rs_fprop = ub_overlap_rs and parallel_mode == "row" and sequence_parallel
        self.ub_name = ub_name
        self.fsdp_group = fsdp_group
        self.fuse_wgrad_accumulation = False
        self.fp8 = False
        self.quantizers = {}

    def forward(self, inp, is_first_microbatch=None):
        if torch.is_grad_enabled():
            linear_fn = _Linear.apply
            args = []
        else:
            linear_fn = _Linear.forward
            args = [None]
        args += (
            self.weight,
            inp,
            self.bias,
            is_first_microbatch,
            None,
            None,
            self.fuse_wgrad_accumulation,
            self.tp_group,
            self.tp_size,
            self.sequence_parallel,
            self.parallel_mode,
            torch.is_grad_enabled(),
            self.ub_overlap_rs_fprop,
            self.ub_name,
            self.fsdp_group,
        )
        return linear_fn(*args)
