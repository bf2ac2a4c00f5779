# Modelled on TransformerEngine 1.x transformer_engine/pytorch/module/layernorm_linear.py
from typing import Any, Dict, Optional, Tuple, Union

import torch

import transformer_engine_torch as tex
from transformer_engine.pytorch.cpp_extensions import fp8_gemm, gemm
from transformer_engine.pytorch.distributed import (
    allreduce,
    gather_along_first_dim,
    get_distributed_world_size,
    reduce_scatter_along_first_dim,
)
from transformer_engine.pytorch.module.base import TransformerEngineBaseModule, get_ub
from transformer_engine.pytorch.module._common import apply_normalization
from transformer_engine.pytorch.utils import cast_if_needed


class _LayerNormLinear(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx,
        inp: torch.Tensor,
        ln_weight: torch.Tensor,
        ln_bias: Union[torch.Tensor, None],
        weight: torch.Tensor,
        weight_fp8: Optional[torch.Tensor],
        bias: torch.Tensor,
        use_bias: bool,
        eps: float,
        is_first_microbatch: Union[bool, None],
        fp8: bool,
        fp8_meta: Dict[str, Any],
        tp_group,
        tp_size: int,
        sequence_parallel: bool,
        activation_dtype: torch.dtype,
        parallel_mode: Union[str, None],
        return_layernorm_output: bool,
        is_grad_enabled: bool,
        fwd_ln_sm_margin: int,
        zero_centered_gamma: bool,
        normalization: str,
        ub_overlap_ag: bool,
        ub_name: str,
    ) -> Union[Tuple[torch.Tensor, ...], torch.Tensor]:
        in_features = ln_weight.numel()
        assert inp.shape[-1] == in_features, "GEMM not possible"
        inputmat = inp.view((-1, in_features))
        inputmat = cast_if_needed(inputmat, activation_dtype)
        ln_weight = cast_if_needed(ln_weight, activation_dtype)

        tp_world_size = get_distributed_world_size(tp_group)
        if ub_overlap_ag:
            if tp_world_size == 1 or (not is_grad_enabled):
                ub_overlap_ag = False
        if ub_overlap_ag:
            ub_obj_lnout = get_ub(ub_name + "_fprop")
            if return_layernorm_output:
                ln_out = torch.empty_like(inputmat, memory_format=torch.contiguous_format)
            else:
                ln_out = ub_obj_lnout.get_ubuf_output(0)
        else:
            ln_out = torch.empty_like(inputmat, memory_format=torch.contiguous_format)

        ln_out, mu, rsigma = apply_normalization(
            inputmat, ln_out, ln_weight, ln_bias, eps, fp8, fp8_meta,
            normalization, fwd_ln_sm_margin, zero_centered_gamma, is_grad_enabled,
        )

        if ub_overlap_ag:
            ln_out_total = ub_obj_lnout.get_ubuf_output(1)
            ln_out = torch.empty_like(ln_out)
        elif parallel_mode == "column" and sequence_parallel:
            ln_out_total, _ = gather_along_first_dim(ln_out, tp_group)
        else:
            ln_out_total = ln_out

        if fp8:
            out, _ = fp8_gemm(
                weight_fp8._data,
                fp8_meta["scaling_fwd"].scale_inv,
                tex.FP8FwdTensors.GEMM1_WEIGHT,
                ln_out_total,
                activation_dtype,
                bias=bias,
                use_bias=use_bias,
                ub_algo=tex.UbufOverlapAlgo.SPLIT_PIPELINED_AG_P2P if ub_overlap_ag else None,
                ub=ub_obj_lnout if ub_overlap_ag else None,
                extra_output_tensor=ln_out if ub_overlap_ag else None,
            )
        else:
            out, _, _ = gemm(
                weight,
                ln_out_total,
                activation_dtype,
                bias=bias,
                use_bias=use_bias,
                ub_algo=tex.UbufOverlapAlgo.SPLIT_PIPELINED_AG_P2P if ub_overlap_ag else None,
                ub=ub_obj_lnout if ub_overlap_ag else None,
                extra_output_tensor=ln_out if ub_overlap_ag else None,
            )

        if is_grad_enabled:
            ctx.save_for_backward(inputmat, ln_weight, mu, rsigma, weight, weight_fp8, ln_out)
            ctx.tp_group = tp_group
            ctx.sequence_parallel = sequence_parallel
            ctx.ub_name = ub_name

        if parallel_mode == "row" and sequence_parallel:
            out, _ = reduce_scatter_along_first_dim(out, tp_group)
        elif parallel_mode == "row" and tp_size > 1:
            out, _ = allreduce(out, tp_group)

        out = out.view(-1, *inp.shape[1:-1], out.shape[-1])
        if return_layernorm_output:
            return out, ln_out.view_as(inp)
        return out


class LayerNormLinear(TransformerEngineBaseModule):
    def forward(self, inp: torch.Tensor, is_first_microbatch: Optional[bool] = None):
        with self.prepare_forward(inp, is_first_microbatch) as inp:
            weight_tensor = self.weight
            weight_fp8 = None
            if self.fp8:
                weight_fp8 = self.get_fp8_workspace(
                    tensor=weight_tensor,
                    fp8_meta_forward=True,
                    fp8_meta_index=tex.FP8FwdTensors.GEMM1_WEIGHT,
                    cache_name=(None if is_first_microbatch is None else "weight"),
                    update_workspace=is_first_microbatch is None or is_first_microbatch,
                    with_transpose=torch.is_grad_enabled(),
                )

            if torch.is_grad_enabled():
                fwd_fn = _LayerNormLinear.apply
                args = []
            else:
                fwd_fn = _LayerNormLinear.forward
                args = [None]
            args += (
                inp,
                self.layer_norm_weight,
                self.layer_norm_bias,
                weight_tensor,
                weight_fp8,
                self.bias,
                self.apply_bias and not self.gemm_bias_unfused_add,
                self.eps,
                is_first_microbatch,
                self.fp8,
                self.fp8_meta,
                self.tp_group,
                self.tp_size,
                self.sequence_parallel,
                self.activation_dtype,
                self.parallel_mode,
                self.return_layernorm_output,
                torch.is_grad_enabled(),
                self.fwd_ln_sm_margin,
                self.zero_centered_gamma,
                self.normalization,
                self.ub_overlap_ag,
                self.ub_name,
            )
            out = fwd_fn(*args)
        return out
