"""Linear module (forward only), modelled on transformer_engine/pytorch/module/linear.py."""
from typing import Optional

import torch

from transformer_engine.pytorch.module.base import TransformerEngineBaseModule
from .function import _Linear


class Linear(TransformerEngineBaseModule):
    """Applies a linear transformation to the incoming data :math:`y = xA^T + b`."""

    def __init__(self, in_features, out_features, *, tp_group=None, tp_size=1, parallel_mode=None,
                 sequence_parallel=False, ub_overlap_rs_fprop=False, ub_name=None, symmetric_ar_type=None,
                 params_dtype=torch.bfloat16):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.tp_group = tp_group
        self.tp_size = tp_size
        self.parallel_mode = parallel_mode
        self.sequence_parallel = sequence_parallel
        self.ub_overlap_rs_fprop = ub_overlap_rs_fprop
        self.ub_name = ub_name
        self.symmetric_ar_type = symmetric_ar_type
        self.activation_dtype = params_dtype

    def forward(self, inp: torch.Tensor, is_first_microbatch: Optional[bool] = None) -> torch.Tensor:
        is_grad_enabled = torch.is_grad_enabled()
        with self.prepare_forward(inp, is_first_microbatch) as inp:
            weight_tensor, bias_tensor = self._get_weight_and_bias_tensors()
            input_quantizer, weight_quantizer = self._get_quantizers()

            if is_grad_enabled:
                linear_fn = _Linear.apply
                args = []
            else:
                linear_fn = _Linear.forward
                args = [None]
            args += (
                weight_tensor,
                inp,
                bias_tensor if self.apply_bias else None,
                is_first_microbatch,
                self.fp8,
                input_quantizer,
                weight_quantizer,
                self.tp_group,
                self.tp_size,
                self.sequence_parallel,
                self.tp_size > 1,
                self.activation_dtype,
                self.parallel_mode,
                is_grad_enabled,
                self.ub_overlap_rs_fprop,
                self.ub_name,
                self.symmetric_ar_type,
            )
            out = linear_fn(*args)
        return out
