import torch

from .linear_fn import _Linear


class Linear(torch.nn.Module):
    def __init__(self, in_features, out_features, tp_group=None, tp_size=1, parallel_mode="row",
                 sequence_parallel=False, ub_overlap_rs=False, ub_name="proj", fp8=False):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(out_features, in_features // tp_size))
        self.bias = torch.nn.Parameter(torch.zeros(out_features))
        self.tp_group = tp_group
        self.tp_size = tp_size
        self.parallel_mode = parallel_mode
        self.sequence_parallel = sequence_parallel
        self.ub_overlap_rs_fprop = ub_overlap_rs and parallel_mode == "row" and sequence_parallel
        self.ub_name = ub_name
        self.fp8 = fp8
        self.quantizers = {"input": None, "weight": None}

    def forward(self, inp, is_first_microbatch=None):
        is_grad_enabled = torch.is_grad_enabled()
        if is_grad_enabled:
            linear_fn = _Linear.apply
            args = []
        else:
            linear_fn = _Linear.forward
            args = [None]
        args += (
            self.weight, inp, self.bias, is_first_microbatch, self.fp8,
            self.quantizers["input"], self.quantizers["weight"], self.tp_group, self.tp_size,
            self.sequence_parallel, self.parallel_mode, is_grad_enabled,
            self.ub_overlap_rs_fprop, self.ub_name,
        )
        return linear_fn(*args)
