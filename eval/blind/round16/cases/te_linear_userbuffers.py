# adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/linear.py
from typing import Any, Dict, Optional, Union

import torch

import transformer_engine_extensions as tex
from transformer_engine.pytorch.cpp_extensions import cast_to_fp8, fp8_cast_transpose_fused, fp8_gemm, gemm
from transformer_engine.pytorch.distributed import (
    allreduce,
    gather_along_first_dim,
    in_fp8_activation_recompute_phase,
    is_fp8_activation_recompute_enabled,
    reduce_scatter_along_first_dim,
)
from transformer_engine.pytorch.module.base import TransformerEngineBaseModule, get_ub, get_workspace
from transformer_engine.pytorch.utils import cast_if_needed


class _Linear(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx,
        weight: torch.Tensor,
        weight_fp8: Optional[torch.Tensor],
        inp: torch.Tensor,
        bias: torch.Tensor,
        use_bias: bool,
        fp8: bool,
        fp8_meta: Dict[str, Any],
        tp_group,
        sequence_parallel: bool,
        activation_dtype: torch.dtype,
        parallel_mode: Union[str, None],
        is_grad_enabled: bool,
        ub_overlap_ag: bool,
        ub_name: str,
    ) -> torch.Tensor:
        in_features = weight.shape[-1]
        inputmat = cast_if_needed(inp.view((-1, in_features)), activation_dtype)
        # Userbuffers all-gather overlap for sequence-parallel column linears
        ub_overlap_ag = ub_overlap_ag and is_grad_enabled

        if parallel_mode == "column" and sequence_parallel:
            if ub_overlap_ag:
                ub_obj = get_ub(ub_name + "_fprop")
                ub_obj.copy_input_to_ubuf(inputmat, True)
                inputmat_total = ub_obj.get_ubuf_output(1)
            else:
                inputmat_total, _ = gather_along_first_dim(inputmat, tp_group)
        else:
            inputmat_total = inputmat

        weight_t_fp8 = None
        if fp8:
            fp8_dtype_forward = tex.DType.kFloat8E4M3
            if (is_grad_enabled
                    or (is_fp8_activation_recompute_enabled()
                        and not in_fp8_activation_recompute_phase())):
                # cast and also produce the transpose needed by wgrad
                weight_t_fp8 = torch.empty_like(weight_fp8)
                fp8_cast_transpose_fused(weight, fp8_meta["scaling_fwd"], tex.FP8FwdTensors.GEMM1_WEIGHT,
                                         fp8_dtype_forward, cast_out=weight_fp8, transpose_out=weight_t_fp8)
            else:
                cast_to_fp8(weight, fp8_meta["scaling_fwd"], tex.FP8FwdTensors.GEMM1_WEIGHT,
                            fp8_dtype_forward, out=weight_fp8)
            out = fp8_gemm(weight_fp8, fp8_meta["scaling_fwd"].scale_inv, tex.FP8FwdTensors.GEMM1_WEIGHT,
                           fp8_dtype_forward, inputmat_total, fp8_meta["scaling_fwd"].scale_inv,
                           tex.FP8FwdTensors.GEMM1_INPUT, fp8_dtype_forward, activation_dtype,
                           get_workspace(), bias=bias, use_bias=use_bias,
                           ub=get_ub(ub_name + "_fprop") if ub_overlap_ag else None)[0]
        else:
            out, _, _ = gemm(cast_if_needed(weight, activation_dtype), inputmat_total, activation_dtype,
                             get_workspace(), bias=bias, use_bias=use_bias,
                             ub=get_ub(ub_name + "_fprop") if ub_overlap_ag else None)

        if is_grad_enabled:
            ctx.save_for_backward(inputmat, weight, weight_t_fp8)
            ctx.activation_dtype = activation_dtype
            ctx.fp8 = fp8
            ctx.fp8_meta = fp8_meta
            ctx.use_bias = use_bias
            ctx.sequence_parallel = sequence_parallel
            ctx.inp_shape = inp.shape
            ctx.parallel_mode = parallel_mode
            ctx.tp_group = tp_group
            ctx.requires_dgrad = inp.requires_grad

        if parallel_mode == "row" and sequence_parallel:
            out, _ = reduce_scatter_along_first_dim(out, tp_group)
        elif parallel_mode == "row":
            out, _ = allreduce(out, tp_group)
        return out.view(-1, *inp.shape[1:-1], out.shape[-1])


class Linear(TransformerEngineBaseModule):
    def forward(self, inp: torch.Tensor, is_first_microbatch: Optional[bool] = None) -> torch.Tensor:
        with self.prepare_forward(inp, is_first_microbatch) as inp:
            weight_tensor, weight_fp8 = self.weight, self.weight_fp8
            if torch.is_grad_enabled():
                linear_fn = _Linear.apply
                args = []
            else:
                linear_fn = _Linear.forward
                args = [None]
            args += (
                weight_tensor,
                weight_fp8,
                inp,
                self.bias,
                self.apply_bias,
                self.fp8,
                self.fp8_meta,
                self.tp_group,
                self.sequence_parallel,
                self.activation_dtype,
                self.parallel_mode,
                torch.is_grad_enabled(),
                self.ub_overlap_ag,
                self.ub_name,
            )
            return linear_fn(*args)
