# adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/layernorm_mlp.py
"""LayerNormMLP API"""
from typing import Any, Dict, Optional, Tuple, Union

import torch

import transformer_engine_extensions as tex

from .base import get_workspace, get_ub, TransformerEngineBaseModule, _2X_ACC_FPROP
from ..fp8 import get_fp8_te_dtype, FP8GlobalStateManager
from ..utils import cast_if_needed, assert_dim_for_fp8_exec, clear_tensor_data
from ..distributed import (
    get_distributed_world_size,
    gather_along_first_dim,
    reduce_scatter_along_first_dim,
    is_fp8_activation_recompute_enabled,
    in_fp8_activation_recompute_phase,
)
from ._common import _apply_normalization, _act_func

__all__ = ["LayerNormMLP"]


class _LayerNormMLP(torch.autograd.Function):
    """LayerNormMLP semi-top level module
    Calls custom cuda extensions.
    """

    @staticmethod
    def forward(
        ctx,
        inp: torch.Tensor,
        ln_weight: torch.Tensor,
        ln_bias: torch.Tensor,
        fc1_weight: torch.Tensor,
        fc1_weight_fp8: Optional[torch.Tensor],
        fc1_weight_t_fp8: Optional[torch.Tensor],
        fc1_bias: torch.Tensor,
        use_fc1_bias: bool,
        fc2_weight: torch.Tensor,
        fc2_weight_fp8: Optional[torch.Tensor],
        fc2_weight_t_fp8: Optional[torch.Tensor],
        fc2_bias: torch.Tensor,
        use_fc2_bias: bool,
        eps: float,
        is_first_microbatch: Union[bool, None],
        fp8: bool,
        fp8_calibration: bool,
        fp8_meta: Dict[str, Any],
        tp_group,
        sequence_parallel: bool,
        set_parallel_mode: bool,
        activation_dtype: torch.dtype,
        return_layernorm_output: bool,
        is_grad_enabled: bool,
        fwd_ln_sm_margin: int,
        zero_centered_gamma: bool,
        activation: str,
        normalization: str,
        ub_split_ag: bool,
        ub_atomic_gemm_ag: bool,
        ub_split_rs: bool,
        ub_atomic_gemm_rs: bool,
    ) -> Union[Tuple[torch.Tensor, ...], torch.Tensor]:
        # Make sure input dimensions are compatible
        in_features = ln_weight.numel()
        assert inp.shape[-1] == in_features, "GEMM not possible"
        inputmat = inp.view((-1, in_features))
        if fp8:
            assert_dim_for_fp8_exec(inputmat)
            assert_dim_for_fp8_exec(fc1_weight)
            assert_dim_for_fp8_exec(fc2_weight)

        update_fp8_weights = is_first_microbatch is None or is_first_microbatch

        activation_func = _act_func(activation)[0]

        # Cast for native AMP
        inputmat = cast_if_needed(inputmat, activation_dtype)
        ln_weight = cast_if_needed(ln_weight, activation_dtype)
        if ln_bias is not None:
            ln_bias = cast_if_needed(ln_bias, activation_dtype)

        if ub_split_ag or ub_atomic_gemm_ag:
            tp_world_size = get_distributed_world_size(tp_group)
            if tp_world_size == 1 or (not is_grad_enabled) or return_layernorm_output:
                ub_split_ag = False
                ub_atomic_gemm_ag = False
        ub_overlap_ag = ub_split_ag or ub_atomic_gemm_ag
        if ub_overlap_ag:
            ub_obj_lnout = get_ub("fc1_fprop")
            ln_out = ub_obj_lnout.get_ubuf_output(0)
        else:
            ln_out_dtype = torch.uint8 if (fp8 and not return_layernorm_output) else inputmat.dtype
            ln_out = torch.empty_like(inputmat, dtype=ln_out_dtype)
        if ub_split_rs or ub_atomic_gemm_rs:
            tp_world_size = get_distributed_world_size(tp_group)
            if tp_world_size == 1:
                ub_split_rs = False
                ub_atomic_gemm_rs = False

        fp8_dtype_forward = get_fp8_te_dtype(fp8_meta["recipe"], fprop_tensor=True)

        ln_out, mu, rsigma = _apply_normalization(
            inputmat, ln_out, ln_weight, ln_bias, eps,
            fp8 and not return_layernorm_output, fp8_meta, normalization,
            fwd_ln_sm_margin, zero_centered_gamma,
        )

        # Column Parallel Linear
        if ub_overlap_ag:
            ln_out_total = ub_obj_lnout.get_ubuf_output(1)
            ln_out = torch.empty_like(ln_out)
        elif set_parallel_mode and sequence_parallel:
            ln_out_total, _ = gather_along_first_dim(ln_out, tp_group)
        else:
            ln_out_total = ln_out

        if fp8:
            if update_fp8_weights:
                if (is_grad_enabled
                        or (is_fp8_activation_recompute_enabled()
                            and not in_fp8_activation_recompute_phase())):
                    # Fused cast-transpose kernels; the transposes feed dgrad/wgrad
                    tex.fp8_cast_transpose_fused(
                        fc1_weight, fp8_meta["scaling_fwd"], tex.FP8FwdTensors.GEMM1_WEIGHT,
                        fp8_dtype_forward, cast_out=fc1_weight_fp8._data,
                        transpose_out=fc1_weight_t_fp8._data,
                    )
                    tex.fp8_cast_transpose_fused(
                        fc2_weight, fp8_meta["scaling_fwd"], tex.FP8FwdTensors.GEMM2_WEIGHT,
                        fp8_dtype_forward, cast_out=fc2_weight_fp8._data,
                        transpose_out=fc2_weight_t_fp8._data,
                    )
                else:
                    tex.cast_to_fp8(fc1_weight, fp8_meta["scaling_fwd"],
                                    tex.FP8FwdTensors.GEMM1_WEIGHT, fp8_dtype_forward,
                                    out=fc1_weight_fp8._data)
                    fc1_weight_t_fp8 = None
                    tex.cast_to_fp8(fc2_weight, fp8_meta["scaling_fwd"],
                                    tex.FP8FwdTensors.GEMM2_WEIGHT, fp8_dtype_forward,
                                    out=fc2_weight_fp8._data)
                    fc2_weight_t_fp8 = None

            ub_algo = tex.UbufOverlapAlgo.SPLIT_PIPELINED_AG if ub_split_ag else None
            ub_algo = tex.UbufOverlapAlgo.ATOMIC_GEMM_AG if ub_atomic_gemm_ag else ub_algo
            fc1_out, _ = tex.fp8_gemm(
                fc1_weight_fp8._data, fp8_meta["scaling_fwd"].scale_inv,
                tex.FP8FwdTensors.GEMM1_WEIGHT, fp8_dtype_forward, ln_out_total,
                fp8_meta["scaling_fwd"].scale_inv, tex.FP8FwdTensors.GEMM1_INPUT,
                fp8_dtype_forward, activation_dtype, get_workspace(),
                bias=fc1_bias, use_bias=use_fc1_bias, use_split_accumulator=_2X_ACC_FPROP,
                ub_algo=ub_algo, ub=ub_obj_lnout if ub_overlap_ag else None,
                extra_output_tensor=ln_out if ub_overlap_ag else None,
            )
            gelu_out = activation_func(fc1_out, fp8_meta["scaling_fwd"],
                                       tex.FP8FwdTensors.GEMM2_INPUT, fp8_dtype_forward)
        else:
            fc1_weight = cast_if_needed(fc1_weight, activation_dtype)
            fc2_weight = cast_if_needed(fc2_weight, activation_dtype)
            fc1_outputs = tex.gemm(
                fc1_weight, ln_out_total, activation_dtype, get_workspace(),
                bias=fc1_bias, use_bias=use_fc1_bias, gelu=(activation == "gelu"),
                ub_algo=tex.UbufOverlapAlgo.SPLIT_PIPELINED_AG if ub_split_ag else None,
                ub=ub_obj_lnout if ub_split_ag else None,
                extra_output_tensor=ln_out if ub_split_ag else None,
            )
            gelu_out, _, fc1_out = fc1_outputs

        if not is_grad_enabled:
            clear_tensor_data(ln_out_total, fc1_out)

        dim_size = list(gelu_out.size())
        dim_size[1] = fc2_weight.size(0)
        fc2_out = torch.empty(dim_size, dtype=activation_dtype, device=gelu_out.device)
        _ = tex.gemm(fc2_weight, gelu_out, activation_dtype, get_workspace(),
                     bias=fc2_bias, use_bias=use_fc2_bias, out=fc2_out)

        if is_grad_enabled:
            ctx.save_for_backward(
                inputmat, ln_weight, mu, rsigma, ln_out, fc1_out, gelu_out,
                fc1_weight, fc1_weight_t_fp8, fc2_weight, fc2_weight_t_fp8,
            )
            ctx.activation_dtype = activation_dtype
            ctx.fp8 = fp8
            ctx.fp8_meta = fp8_meta
            ctx.tp_group = tp_group
            ctx.sequence_parallel = sequence_parallel
            ctx.ub_split_ag = ub_split_ag
            ctx.ub_atomic_gemm_ag = ub_atomic_gemm_ag

        # Row Parallel Linear
        if set_parallel_mode and sequence_parallel:
            fc2_out, _ = reduce_scatter_along_first_dim(fc2_out, tp_group)

        fc2_out = fc2_out.view(-1, *inp.shape[1:-1], fc2_out.shape[-1])
        if return_layernorm_output:
            return fc2_out, ln_out.view_as(inp)
        return fc2_out


class LayerNormMLP(TransformerEngineBaseModule):
    """Applies layer normalization on the input followed by the MLP module."""

    def forward(
        self,
        inp: torch.Tensor,
        is_first_microbatch: Optional[bool] = None,
    ) -> Union[torch.Tensor, Tuple[torch.Tensor, ...]]:
        with self.prepare_forward(inp, is_first_microbatch, num_gemms=2) as inp:
            weight1_fp8, weight1_t_fp8, weight2_fp8, weight2_t_fp8 = self.get_fp8_weights_scratchpad(
                is_first_microbatch
            )

            if torch.is_grad_enabled():
                fwd_fn = _LayerNormMLP.apply
                args = []
            else:
                fwd_fn = _LayerNormMLP.forward
                args = [None]
            args += (
                inp,
                self.layer_norm_weight,
                self.layer_norm_bias,
                self.fc1_weight,
                weight1_fp8,
                weight1_t_fp8,
                self.fc1_bias,
                self.use_bias,
                self.fc2_weight,
                weight2_fp8,
                weight2_t_fp8,
                self.fc2_bias,
                self.use_bias,
                self.eps,
                is_first_microbatch,
                self.fp8,
                self.fp8_calibration,
                self.fp8_meta,
                self.tp_group,
                self.sequence_parallel,
                self.set_parallel_mode,
                self.activation_dtype,
                self.return_layernorm_output,
                torch.is_grad_enabled(),
                self.fwd_ln_sm_margin,
                self.zero_centered_gamma,
                self.activation,
                self.normalization,
                self.ub_split_ag,
                self.ub_atomic_gemm_ag,
                self.ub_split_rs,
                self.ub_atomic_gemm_rs,
            )
            out = fwd_fn(*args)

        if self.return_layernorm_output:
            out, ln_out = out
            return out, ln_out
        return out
