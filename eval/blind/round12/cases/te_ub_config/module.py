# adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/layernorm_mlp.py
import torch

from .config import ForwardCommConfig
from .function import _Linear


class Linear(torch.nn.Module):
    def __init__(self, in_features, out_features, tp_group=None, sequence_parallel=False,
                 ub_overlap_ag=False, ub_overlap_rs=False, params_dtype=torch.bfloat16):
        super().__init__()
        self.tp_group = tp_group
        self.sequence_parallel = sequence_parallel
        self.ub_overlap_ag = ub_overlap_ag
        self.ub_overlap_rs = ub_overlap_rs
        self.activation_dtype = params_dtype
        self.weight = torch.nn.Parameter(torch.empty(out_features, in_features, dtype=params_dtype))
        self.bias = torch.nn.Parameter(torch.zeros(out_features, dtype=params_dtype))

    def forward(self, inp: torch.Tensor) -> torch.Tensor:
        cfg = ForwardCommConfig.from_module(self)
        return _Linear.apply(inp, self.weight, self.bias, cfg, self.tp_group, self.activation_dtype)
