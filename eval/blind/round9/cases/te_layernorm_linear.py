"""LayerNormLinear API (trimmed)."""
from typing import Optional, Tuple, Union

import torch
from torch.nn import init

from transformer_engine.pytorch.distributed import gather_along_first_dim
from transformer_engine.pytorch.module.base import TransformerEngineBaseModule, get_ub
from transformer_engine.pytorch.module._common import apply_normalization
import transformer_engine_torch as tex


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
        input_quantizer,
        weight_quantizer,
        tp_group,
        tp_size: int,
        sequence_parallel: bool,
        ub_overlap_ag_fprop: bool,
        ub_name: str,
        return_layernorm_output: bool,
        normalization: str,
        is_grad_enabled: bool,
    ) -> Union[Tuple[torch.Tensor, ...], torch.Tensor]:
        in_features = ln_weight.numel()
        inputmat = inp.view((-1, in_features))
        weight_requires_grad = weight.requires_grad
        backward_needs_input = is_grad_enabled and weight_requires_grad

        ub_overlap_ag_fprop = ub_overlap_ag_fprop and is_grad_enabled and not return_layernorm_output
        with_input_all_gather = sequence_parallel and not ub_overlap_ag_fprop

        if input_quantizer is not None:
            input_quantizer.set_usage(rowwise=True, columnwise=backward_needs_input)

        ln_out, mu, rsigma = apply_normalization(
            inputmat, None, ln_weight, ln_bias, eps, input_quantizer, inp.dtype, normalization
        )

        ub_obj = None
        if ub_overlap_ag_fprop:
            ub_obj = get_ub(ub_name + "_fprop")
            ln_out_total = ub_obj.get_buffer(input_quantizer, local_chunk=False)
        elif with_input_all_gather:
            ln_out_total, _ = gather_along_first_dim(ln_out, tp_group, quantizer=input_quantizer)
        else:
            ln_out_total = ln_out

        out, *_ = tex.generic_gemm(
            weight,
            True,
            ln_out_total,
            False,
            None,
            bias=bias,
            ub=ub_obj,
            ub_type=tex.CommOverlapType.AG if ub_obj is not None else None,
        )

        if is_grad_enabled:
            ctx.save_for_backward(inputmat, ln_weight, ln_out, weight, mu, rsigma)
            ctx.sequence_parallel = sequence_parallel
            ctx.tp_group = tp_group
            ctx.tp_size = tp_size
            ctx.requires_wgrad = weight_requires_grad
            ctx.ub_name = ub_name

        out = out.view(-1, *inp.shape[1:-1], out.shape[-1])
        if return_layernorm_output:
            return out, ln_out.view_as(inp)
        return out


class LayerNormLinear(TransformerEngineBaseModule):
    def __init__(
        self,
        in_features: int,
        out_features: int,
        eps: float = 1e-5,
        sequence_parallel: bool = False,
        tp_group=None,
        tp_size: int = 1,
        return_layernorm_output: bool = False,
        normalization: str = "LayerNorm",
        ub_overlap_ag: bool = False,
        ub_name: Optional[str] = None,
        params_dtype: Optional[torch.dtype] = None,
    ) -> None:
        super().__init__()
        params_dtype = torch.get_default_dtype() if params_dtype is None else params_dtype
        self.eps = eps
        self.sequence_parallel = sequence_parallel
        self.tp_group = tp_group
        self.tp_size = tp_size
        self.return_layernorm_output = return_layernorm_output
        self.normalization = normalization
        self.ub_overlap_ag_fprop = ub_overlap_ag and sequence_parallel
        self.ub_name = ub_name
        self.layer_norm_weight = torch.nn.Parameter(torch.ones(in_features, dtype=params_dtype))
        self.layer_norm_bias = torch.nn.Parameter(torch.zeros(in_features, dtype=params_dtype))
        self.weight = torch.nn.Parameter(
            torch.empty(out_features // tp_size, in_features, dtype=params_dtype)
        )
        self.bias = torch.nn.Parameter(torch.zeros(out_features // tp_size, dtype=params_dtype))
        init.xavier_uniform_(self.weight)

    def forward(self, inp: torch.Tensor):
        with self.prepare_forward(inp) as inp:
            input_quantizer, weight_quantizer = self._get_quantizers()
            out = _LayerNormLinear.apply(
                inp,
                self.layer_norm_weight,
                self.layer_norm_bias,
                self.weight,
                self.bias,
                self.eps,
                input_quantizer,
                weight_quantizer,
                self.tp_group,
                self.tp_size,
                self.sequence_parallel,
                self.ub_overlap_ag_fprop,
                self.ub_name,
                self.return_layernorm_output,
                self.normalization,
                torch.is_grad_enabled(),
            )
        return out
