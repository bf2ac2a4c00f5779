from typing import Optional, Tuple

import torch

from transformer_engine.pytorch.module.base import get_ub, get_workspace
from transformer_engine.pytorch.cpp_extensions import general_gemm, apply_normalization
from transformer_engine.pytorch.distributed import gather_along_first_dim


class _LayerNormLinear(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx,
        inp: torch.Tensor,
        ln_weight: torch.Tensor,
        ln_bias: Optional[torch.Tensor],
        weight: torch.Tensor,
        bias: Optional[torch.Tensor],
        eps: float,
        tp_group,
        tp_size: int,
        sequence_parallel: bool,
        input_quantizer,
        is_grad_enabled: bool,
        return_layernorm_output: bool,
        ub_overlap_ag_fprop: bool,
        ub_name: str,
        normalization: str,
    ) -> Tuple[torch.Tensor, ...]:
        in_features = ln_weight.numel()
        inputmat = inp.view((-1, in_features))

        backward_needs_input = is_grad_enabled and weight.requires_grad
        ub_overlap_ag_fprop = (
            ub_overlap_ag_fprop and is_grad_enabled and not return_layernorm_output
        )

        if input_quantizer is not None:
            input_quantizer.set_usage(rowwise=True, columnwise=backward_needs_input)

        ln_out, mu, rsigma = apply_normalization(
            inputmat, ln_weight, ln_bias, eps, normalization, input_quantizer
        )

        ub_obj = None
        if ub_overlap_ag_fprop:
            ub_obj = get_ub(ub_name + "_fprop")
            ln_out_total = ub_obj.get_buffer(local_chunk=False)
        elif sequence_parallel and tp_size > 1:
            ln_out_total, _ = gather_along_first_dim(ln_out, tp_group)
        else:
            ln_out_total = ln_out

        out, *_ = general_gemm(
            weight,
            ln_out_total,
            get_workspace(),
            bias=bias,
            ub=ub_obj,
            ub_type="AG" if ub_obj is not None else None,
        )

        if is_grad_enabled:
            ctx.save_for_backward(inputmat, ln_weight, weight, mu, rsigma, ln_out)
            ctx.tp_group = tp_group
            ctx.sequence_parallel = sequence_parallel
            ctx.requires_dgrad = inp.requires_grad

        out = out.view(-1, *inp.shape[1:-1], out.shape[-1])
        if return_layernorm_output:
            return out, ln_out.view_as(inp)
        return out


class LayerNormLinear(torch.nn.Module):
    def __init__(self, in_features, out_features, eps=1e-5, tp_group=None, tp_size=1,
                 sequence_parallel=False, ub_overlap_ag=False, ub_name="qkv",
                 return_layernorm_output=False, normalization="LayerNorm"):
        super().__init__()
        self.layer_norm_weight = torch.nn.Parameter(torch.ones(in_features))
        self.layer_norm_bias = torch.nn.Parameter(torch.zeros(in_features))
        self.weight = torch.nn.Parameter(torch.empty(out_features // tp_size, in_features))
        self.bias = torch.nn.Parameter(torch.zeros(out_features // tp_size))
        self.eps = eps
        self.tp_group = tp_group
        self.tp_size = tp_size
        self.sequence_parallel = sequence_parallel
        self.ub_overlap_ag = ub_overlap_ag
        self.ub_name = ub_name
        self.return_layernorm_output = return_layernorm_output
        self.normalization = normalization
        self.input_quantizer = None

    def forward(self, inp):
        if torch.is_grad_enabled():
            fwd_fn = _LayerNormLinear.apply
            args = []
        else:
            fwd_fn = _LayerNormLinear.forward
            args = [None]
        args += (
            inp, self.layer_norm_weight, self.layer_norm_bias, self.weight, self.bias,
            self.eps, self.tp_group, self.tp_size, self.sequence_parallel,
            self.input_quantizer, torch.is_grad_enabled(), self.return_layernorm_output,
            self.ub_overlap_ag, self.ub_name, self.normalization,
        )
        return fwd_fn(*args)
