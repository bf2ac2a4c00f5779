# adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/layernorm_linear.py
"""LayerNormLinear API"""
from typing import Any, Dict, Optional, Tuple, Union

import torch
from torch.nn import init

import transformer_engine_torch as tex
from .base import (
    TransformerEngineBaseModule,
    _2X_ACC_FPROP,
    get_ub,
    get_workspace,
    resolve_ub_overlap,
)
from ..distributed import (
    allreduce,
    gather_along_first_dim,
    in_fp8_activation_recompute_phase,
    is_fp8_activation_recompute_enabled,
    reduce_scatter_along_first_dim,
)
from ..utils import cast_if_needed, divide
from ._common import _apply_normalization

__all__ = ["LayerNormLinear"]


class _LayerNormLinear(torch.autograd.Function):
    """LayerNormLinear semi-top level module
    Calls custom cuda extensions.
    """

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
        fp8: bool,
        fp8_meta: Dict[str, Any],
        tp_group,
        tp_size: int,
        sequence_parallel: bool,
        tensor_parallel: bool,
        activation_dtype: torch.dtype,
        parallel_mode: Union[str, None],
        return_layernorm_output: bool,
        is_grad_enabled: bool,
        normalization: str,
        ub_overlap_ag: bool,
        ub_atomic_gemm_ag: bool,
        ub_overlap_rs_dgrad: bool,
        ub_name: str,
    ) -> Union[Tuple[torch.Tensor, ...], torch.Tensor]:
        # Make sure input dimensions are compatible
        in_features = ln_weight.numel()
        assert inp.shape[-1] == in_features, "GEMM not possible"
        inputmat = inp.view((-1, in_features))

        # Cast for native AMP
        inputmat = cast_if_needed(inputmat, activation_dtype)
        ln_weight = cast_if_needed(ln_weight, activation_dtype)
        if ln_bias is not None:
            ln_bias = cast_if_needed(ln_bias, activation_dtype)

        cfg = resolve_ub_overlap(
            ub_name,
            tp_group,
            ub_overlap_ag,
            ub_atomic_gemm_ag,
            ub_overlap_rs_dgrad,
            is_grad_enabled,
            return_layernorm_output,
        )
        ub_obj_lnout = None
        ub_algo = None
        if cfg.overlap_ag:
            ub_obj_lnout = get_ub(cfg.name + "_fprop")
            ln_out = ub_obj_lnout.get_ubuf_output(0)
            ub_algo = tex.CommOverlapAlgo.ATOMIC_GEMM_AG if cfg.atomic_gemm_ag else tex.CommOverlapAlgo.SPLIT_PIPELINED_AG
        else:
            ln_out_dtype = torch.uint8 if (fp8 and not return_layernorm_output) else inputmat.dtype
            ln_out = torch.empty_like(inputmat, dtype=ln_out_dtype)

        ln_out, mu, rsigma = _apply_normalization(
            inputmat, ln_out, ln_weight, ln_bias, eps, fp8 and not return_layernorm_output, fp8_meta, normalization
        )

        # Column Parallel Linear
        if ub_obj_lnout is not None:
            ln_out_total = ub_obj_lnout.get_ubuf_output(1)
            ln_out = torch.empty_like(ln_out)
        elif parallel_mode == "column" and sequence_parallel:
            ln_out_total, _ = gather_along_first_dim(ln_out, tp_group)
        else:
            ln_out_total = ln_out

        if return_layernorm_output:
            ln_out_return = ln_out

        weight_t_fp8 = None
        if fp8:
            if is_grad_enabled or (is_fp8_activation_recompute_enabled() and not in_fp8_activation_recompute_phase()):
                tex.fp8_cast_transpose_fused(
                    weight,
                    fp8_meta["scaling_fwd"],
                    tex.FP8FwdTensors.GEMM1_WEIGHT,
                    tex.DType.kFloat8E4M3,
                    cast_out=weight_fp8._data,
                    transpose_out=weight_fp8._transpose,
                )
                weight_t_fp8 = weight_fp8._transpose
            else:
                tex.cast_to_fp8(
                    weight,
                    fp8_meta["scaling_fwd"],
                    tex.FP8FwdTensors.GEMM1_WEIGHT,
                    tex.DType.kFloat8E4M3,
                    out=weight_fp8._data,
                )
            out, _ = tex.fp8_gemm(
                weight_fp8._data,
                fp8_meta["scaling_fwd"].scale_inv,
                tex.FP8FwdTensors.GEMM1_WEIGHT,
                tex.DType.kFloat8E4M3,
                ln_out_total,
                fp8_meta["scaling_fwd"].scale_inv,
                tex.FP8FwdTensors.GEMM1_INPUT,
                tex.DType.kFloat8E4M3,
                activation_dtype,
                get_workspace(),
                bias=bias,
                use_bias=use_bias,
                use_split_accumulator=_2X_ACC_FPROP,
                ub_algo=ub_algo,
                ub=ub_obj_lnout,
                extra_output_tensor=ln_out if ub_obj_lnout is not None else None,
            )
        else:
            weight = cast_if_needed(weight, activation_dtype)
            bias = cast_if_needed(bias, activation_dtype) if use_bias else bias
            out, _, _ = tex.gemm(
                weight,
                ln_out_total,
                activation_dtype,
                get_workspace(),
                bias=bias,
                use_bias=use_bias,
                ub_algo=ub_algo,
                ub=ub_obj_lnout,
                extra_output_tensor=ln_out if ub_obj_lnout is not None else None,
            )

        if is_grad_enabled:
            ctx.save_for_backward(inputmat, ln_weight, mu, rsigma, weight, weight_t_fp8, ln_out)
            ctx.activation_dtype = activation_dtype
            ctx.fp8 = fp8
            ctx.fp8_meta = fp8_meta
            ctx.use_bias = use_bias
            ctx.sequence_parallel = sequence_parallel
            ctx.tensor_parallel = tensor_parallel
            ctx.inp_shape = inp.shape
            ctx.parallel_mode = parallel_mode
            ctx.tp_group = tp_group
            ctx.tp_size = tp_size
            ctx.return_layernorm_output = return_layernorm_output
            ctx.ub_overlap_rs_dgrad = cfg.overlap_rs_dgrad
            ctx.ub_name = ub_name
            ctx.requires_dgrad = inp.requires_grad
            ctx.normalization = normalization

        # Row Parallel Linear
        if parallel_mode == "row" and sequence_parallel:
            out, _ = reduce_scatter_along_first_dim(out, tp_group)
        elif parallel_mode == "row" and tensor_parallel:
            out, _ = allreduce(out, tp_group)

        out = out.view(-1, *inp.shape[1:-1], out.shape[-1])

        if return_layernorm_output:
            return out, ln_out_return.view_as(inp)
        return out

    @staticmethod
    def backward(ctx, *grad_outputs: Tuple[torch.Tensor, ...]) -> Tuple[Union[torch.Tensor, None], ...]:
        raise NotImplementedError("see upstream")


class LayerNormLinear(TransformerEngineBaseModule):
    r"""
    Applies layer normalization followed by linear transformation to the incoming data.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        eps: float = 1e-5,
        sequence_parallel: bool = False,
        tp_group=None,
        tp_size: int = 1,
        bias: bool = True,
        normalization: str = "LayerNorm",
        return_layernorm_output: bool = False,
        parallel_mode: Optional[str] = None,
        params_dtype: Optional[torch.dtype] = None,
        ub_overlap_ag: bool = False,
        ub_atomic_gemm_ag: bool = False,
        ub_overlap_rs_dgrad: bool = False,
        ub_name: Optional[str] = None,
    ) -> None:
        super().__init__()
        params_dtype = torch.get_default_dtype() if params_dtype is None else params_dtype
        self.in_features = in_features
        self.out_features = out_features
        self.normalization = normalization
        self.use_bias = bias
        self.return_layernorm_output = return_layernorm_output
        self.parallel_mode = parallel_mode
        self.tp_group = tp_group
        self.tp_size = tp_size
        self.sequence_parallel = (tp_size > 1) and sequence_parallel
        self.eps = eps
        self.ub_overlap_ag = ub_overlap_ag
        self.ub_atomic_gemm_ag = ub_atomic_gemm_ag
        self.ub_overlap_rs_dgrad = ub_overlap_rs_dgrad
        if any([ub_overlap_ag, ub_atomic_gemm_ag, ub_overlap_rs_dgrad]):
            assert ub_name is not None, "Userbuffer name [string] is not set."
        self.ub_name = ub_name

        if parallel_mode == "column":
            self.out_features = divide(self.out_features, self.tp_size)
        elif parallel_mode == "row":
            self.in_features = divide(self.in_features, self.tp_size)

        self.layer_norm_weight = torch.nn.Parameter(torch.empty(in_features, device="cuda", dtype=params_dtype))
        self.layer_norm_bias = torch.nn.Parameter(torch.empty(in_features, device="cuda", dtype=params_dtype))
        self.weight = torch.nn.Parameter(torch.empty(self.out_features, self.in_features, device="cuda", dtype=params_dtype))
        self.bias = torch.nn.Parameter(torch.empty(self.out_features, device="cuda", dtype=params_dtype))
        init.ones_(self.layer_norm_weight)
        init.zeros_(self.layer_norm_bias)

    def forward(self, inp: torch.Tensor) -> Union[torch.Tensor, Tuple[torch.Tensor, ...]]:
        """
        Apply layer normalization to the input followed by a linear transformation.
        """
        with self.prepare_forward(inp) as inp:
            bias_tensor = self.bias if self.use_bias else torch.Tensor().to(dtype=self.activation_dtype, device="cuda")

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
                self.weight,
                getattr(self, "weight_fp8", None),
                bias_tensor,
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
                torch.is_grad_enabled(),
                self.normalization,
                self.ub_overlap_ag,
                self.ub_atomic_gemm_ag,
                self.ub_overlap_rs_dgrad,
                self.ub_name,
            )
            out = fwd_fn(*args)

        if self.return_layernorm_output:
            out, ln_out = out
            return out, ln_out
        return out
