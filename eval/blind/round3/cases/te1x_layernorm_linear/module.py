# Modelled on transformer_engine/pytorch/module/layernorm_linear.py LayerNormLinear.forward (TE 1.11).
import torch

from transformer_engine.pytorch.module.base import TransformerEngineBaseModule

from ._layernorm_linear import _LayerNormLinear
from .utils import fwd_args_with_grad_mode


class LayerNormLinear(TransformerEngineBaseModule):
    def forward(self, inp: torch.Tensor, is_first_microbatch=None):
        with self.prepare_forward(inp, is_first_microbatch) as inp:
            bias_tensor = self.bias if self.apply_bias else None
            weight_tensor = self.weight
            if torch.is_grad_enabled():
                fwd_fn = _LayerNormLinear.apply
                args = []
            else:
                fwd_fn = _LayerNormLinear.forward
                args = [None]
            args += fwd_args_with_grad_mode(
                inp, self.layer_norm_weight, self.layer_norm_bias, weight_tensor, bias_tensor, self.eps,
                self.fp8, self.fp8_meta, self.tp_group, self.sequence_parallel, self.activation_dtype,
                self.parallel_mode, self.return_layernorm_output, self.ub_overlap_ag, self.ub_name,
                self.normalization,
            )
            out = fwd_fn(*args)
        if self.return_layernorm_output:
            out, ln_out = out
            return out, ln_out
        return out
