# Copyright (c) 2022-2025, NVIDIA CORPORATION & AFFILIATES. All rights reserved.
#
# See LICENSE for license information.

"""LayerNormLinear API (trimmed to the forward path)."""
from typing import Optional, Union

import torch

import transformer_engine_torch as tex

from .base import get_workspace, get_ub, TransformerEngineBaseModule, _2X_ACC_FPROP
from ..distributed import (
    allreduce,
    gather_along_first_dim,
    get_distributed_world_size,
    in_fp8_activation_recompute_phase,
    is_fp8_activation_recompute_enabled,
    reduce_scatter_along_first_dim,
)
from ..utils import cast_if_needed
from ._common import apply_normalization


class _LayerNormLinear(torch.autograd.Function):
    """LayerNormLinear semi-top level module
    Calls custom cuda extensions.
    """

    @staticmethod
    def forward(
        ctx,
        inp: torch.Tensor,
        ln_weight: torch.Tensor,
        ln_bias: Optional[torch.Tensor],
        weight: torch.Tensor,
        bias: torch.Tensor,
        use_bias: bool,
        eps: float,
        fp8: bool,
        fp8_meta: dict,
        tp_group,
        tp_size: int,
        sequence_parallel: bool,
        tensor_parallel: bool,
        activation_dtype: torch.dtype,
        parallel_mode: Union[str, None],
        return_layernorm_output: bool,
        is_grad_enabled: bool,
        fwd_ln_sm_margin: int,
        zero_centered_gamma: bool,
        normalization: str,
        ub_overlap_ag_fprop: bool,
        ub_name: str,
    ):
        in_features = ln_weight.numel()
        inputmat = inp.view((-1, in_features))
        inputmat = cast_if_needed(inputmat, activation_dtype)

        tp_world_size = get_distributed_world_size(tp_group)
        ub_overlap_ag_fprop = ub_overlap_ag_fprop and is_grad_enabled and not return_layernorm_output
        if tp_world_size == 1:
            ub_overlap_ag_fprop = False

        ln_out, mu, rsigma = apply_normalization(
            inputmat,
            None,
            ln_weight,
            ln_bias,
            eps,
            normalization,
            fwd_ln_sm_margin,
            zero_centered_gamma,
            is_grad_enabled,
        )

        ub_obj_fprop = None
        if ub_overlap_ag_fprop:
            ub_obj_fprop = get_ub(ub_name + "_fprop")
            ub_obj_fprop.copy_into_buffer(ln_out, local_chunk=True)
            ln_out_total = ub_obj_fprop.get_buffer(local_chunk=False)
        elif parallel_mode == "column" and sequence_parallel:
            ln_out_total, _ = gather_along_first_dim(ln_out, tp_group)
        else:
            ln_out_total = ln_out

        weight_t_fp8 = None
        if fp8:
            if is_grad_enabled or (
                is_fp8_activation_recompute_enabled() and not in_fp8_activation_recompute_phase()
            ):
                weight_fp8, weight_t_fp8 = tex.fp8_cast_transpose_fused(
                    weight, fp8_meta["scaling_fwd"], tex.FP8FwdTensors.GEMM1_WEIGHT
                )
            else:
                weight_fp8 = tex.cast_to_fp8(
                    weight, fp8_meta["scaling_fwd"], tex.FP8FwdTensors.GEMM1_WEIGHT
                )
            weight = weight_fp8
        else:
            weight = cast_if_needed(weight, activation_dtype)

        out, *_ = tex.general_gemm(
            weight,
            ln_out_total,
            get_workspace(),
            out_dtype=activation_dtype,
            bias=bias if use_bias else None,
            use_split_accumulator=_2X_ACC_FPROP,
            ub=ub_obj_fprop,
            ub_type=tex.CommOverlapType.AG if ub_overlap_ag_fprop else None,
        )

        if is_grad_enabled:
            ctx.save_for_backward(inputmat, ln_weight, mu, rsigma, weight, weight_t_fp8, ln_out)
            ctx.activation_dtype = activation_dtype
            ctx.fp8 = fp8
            ctx.sequence_parallel = sequence_parallel
            ctx.parallel_mode = parallel_mode
            ctx.tp_group = tp_group
            ctx.inp_shape = inp.shape
            ctx.requires_dgrad = inp.requires_grad

        if parallel_mode == "row" and sequence_parallel:
            out, _ = reduce_scatter_along_first_dim(out, tp_group)
        elif parallel_mode == "row" and tensor_parallel:
            out, _ = allreduce(out, tp_group)

        out = out.view(-1, *inp.shape[1:-1], out.shape[-1])
        if return_layernorm_output:
            return out, ln_out.view_as(inp)
        return out


class LayerNormLinear(TransformerEngineBaseModule):
    """Applies layer normalization followed by linear transformation."""

    def forward(self, inp: torch.Tensor, is_first_microbatch: Optional[bool] = None):
        is_grad_enabled = torch.is_grad_enabled()
        with self.prepare_forward(inp, is_first_microbatch) as inp:
            if is_grad_enabled:
                fwd_fn = _LayerNormLinear.apply
                args = []
            else:
                fwd_fn = _LayerNormLinear.forward
                args = [None]
            args += (
                inp,
                self.layer_norm_weight,
                self.layer_norm_bias,
                self.weight,
                self.bias,
                self.use_bias,
                self.eps,
                self.fp8,
                self.fp8_meta,
                self.tp_group,
                self.tp_size,
                self.sequence_parallel,
                self.tp_size > 1,
                self.activation_dtype,
                self.parallel_mode,
                self.return_layernorm_output,
                is_grad_enabled,
                self.fwd_ln_sm_margin,
                self.zero_centered_gamma,
                self.normalization,
                self.ub_overlap_ag_fprop,
                self.ub_name,
            )
            out = fwd_fn(*args)
        return out
