"""Modelled on TransformerEngine transformer_engine/pytorch/module/layernorm_linear.py
(_LayerNormLinear autograd Function + LayerNormLinear module), issue #2902 / PR #3546."""
from typing import Optional, Tuple

import torch

import transformer_engine_torch as tex
from transformer_engine.pytorch.module.base import TransformerEngineBaseModule, get_ub
from transformer_engine.pytorch.cpp_extensions import general_gemm
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
        is_first_microbatch: Optional[bool],
        input_quantizer,
        tp_group,
        tp_size: int,
        sequence_parallel: bool,
        is_grad_enabled: bool,
        return_layernorm_output: bool,
        ub_overlap_ag_fprop: bool,
        ub_name: str,
    ) -> Tuple[torch.Tensor, ...]:
        inputmat = inp.view((-1, inp.shape[-1]))

        # Do TP communication in high precision if quantized format
        # does not support communication
        ub_overlap_ag_fprop = ub_overlap_ag_fprop and is_grad_enabled and not return_layernorm_output

        backward_needs_input = is_grad_enabled and weight.requires_grad
        if input_quantizer is not None:
            input_quantizer.set_usage(rowwise=True, columnwise=backward_needs_input)

        ln_out, mu, rsigma = tex.layernorm_fwd(inputmat, ln_weight, ln_bias, eps, None, None, inp.dtype)

        ub_obj_fprop = None
        if ub_overlap_ag_fprop:
            ub_obj_fprop = get_ub(ub_name + "_fprop")
            ln_out_total = ub_obj_fprop.get_buffer(local_chunk=True)
            ln_out_total.copy_(ln_out)
            ln_out_total = ub_obj_fprop.get_buffer(local_chunk=False)
        elif sequence_parallel:
            ln_out_total, _ = gather_along_first_dim(ln_out, tp_group)
        else:
            ln_out_total = ln_out

        out, *_ = general_gemm(
            weight,
            ln_out_total,
            out_dtype=inp.dtype,
            bias=bias,
            ub=ub_obj_fprop,
            ub_type=tex.CommOverlapType.AG if ub_overlap_ag_fprop else None,
        )

        if is_grad_enabled:
            ctx.save_for_backward(inputmat, ln_weight, mu, rsigma, weight, ln_out)
            ctx.tp_group = tp_group
            ctx.sequence_parallel = sequence_parallel
            ctx.is_first_microbatch = is_first_microbatch

        out = out.view(-1, *inp.shape[1:-1], out.shape[-1])
        if return_layernorm_output:
            return out, ln_out.view_as(inp)
        return out

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError


class LayerNormLinear(TransformerEngineBaseModule):
    def forward(self, inp: torch.Tensor, is_first_microbatch: Optional[bool] = None):
        is_grad_enabled = torch.is_grad_enabled()

        if is_grad_enabled:
            fwd_fn = _LayerNormLinear.apply
            autograd_ctx = []
        else:
            fwd_fn = _LayerNormLinear.forward
            autograd_ctx = [None]

        args = (
            inp,
            self.layer_norm_weight,
            self.layer_norm_bias,
            self.weight,
            self.bias if self.apply_bias else None,
            self.eps,
            is_first_microbatch,
            self.quantizers["scaling_fwd"][0] if self.fp8 else None,
            self.tp_group,
            self.tp_size,
            self.sequence_parallel,
            is_grad_enabled,
            self.return_layernorm_output,
            self.ub_overlap_ag_fprop,
            self.ub_name,
        )
        return fwd_fn(*autograd_ctx, *args)
