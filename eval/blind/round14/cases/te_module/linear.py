# adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/linear.py
"""Linear API"""
from typing import Any, Dict, Optional, Tuple, Union

import torch

import transformer_engine_extensions as tex

from .base import get_workspace, get_ub, TransformerEngineBaseModule, _2X_ACC_FPROP
from ._common import noop_cat
from ..fp8 import get_fp8_te_dtype
from ..utils import cast_if_needed, assert_dim_for_fp8_exec
from ..distributed import get_distributed_world_size, allreduce, reduce_scatter_along_first_dim, gather_along_first_dim
from ..cpp_extensions import fp8_gemm, gemm, fp8_cast_transpose_fused, cast_to_fp8

__all__ = ["Linear"]


class _Linear(torch.autograd.Function):
    """Linear semi-top level module
    Calls custom cuda extensions.
    """

    @staticmethod
    def forward(
        ctx,
        weight: torch.Tensor,
        weight_fp8: Optional[torch.Tensor],
        inp: torch.Tensor,
        bias: torch.Tensor,
        use_bias: bool,
        is_first_microbatch: Union[bool, None],
        fp8: bool,
        fp8_meta: Dict[str, Any],
        tp_group,
        sequence_parallel: bool,
        tensor_parallel: bool,
        activation_dtype: torch.dtype,
        parallel_mode: Union[str, None],
        is_grad_enabled: bool,
        ub_overlap_rs: bool,
        ub_name: str,
    ) -> torch.Tensor:
        # Make sure input dimensions are compatible
        in_features = weight.shape[-1]
        assert inp.shape[-1] == in_features, "GEMM not possible"
        inputmat = inp.view((-1, in_features))
        if fp8:
            assert_dim_for_fp8_exec(inputmat)
            assert_dim_for_fp8_exec(weight)

        ub_overlap_rs &= fp8_meta["ub_overlap_permitted"]
        if ub_overlap_rs:
            tp_world_size = get_distributed_world_size(tp_group)
            if tp_world_size == 1:
                ub_overlap_rs = False

        # Cast input to expected dtype
        inputmat = cast_if_needed(inputmat, activation_dtype)
        inputmat_t = None
        inputmat_no_fp8 = inputmat
        if fp8:
            fp8_dtype_forward = get_fp8_te_dtype(fp8_meta["recipe"], fprop_tensor=True)
            if (
                not fp8_meta["recipe"].override_linear_precision.wgrad
                and is_grad_enabled
                and weight.requires_grad
                and not sequence_parallel
            ):
                # FP8 input for forward, FP8 input transpose for backward wgrad
                inputmat, inputmat_t = fp8_cast_transpose_fused(
                    inputmat, fp8_meta["scaling_fwd"], tex.FP8FwdTensors.GEMM1_INPUT, fp8_dtype_forward,
                )
            else:
                # FP8 input for forward
                inputmat = cast_to_fp8(
                    inputmat, fp8_meta["scaling_fwd"], tex.FP8FwdTensors.GEMM1_INPUT, fp8_dtype_forward,
                )

        # Column Parallel Linear
        if parallel_mode == "column" and sequence_parallel:
            inputmat_total, _ = gather_along_first_dim(inputmat, tp_group)
        else:
            inputmat_total = inputmat

        if ub_overlap_rs:
            ub_obj_projout = get_ub(ub_name + "_fprop")
            out = ub_obj_projout.get_ubuf_output(1)
            dim_size = list(inputmat_total.size())
            dim_size[0] = dim_size[0] // tp_world_size
            dim_size[1] = weight.size(0)
            rs_out = torch.empty(dim_size, dtype=activation_dtype, device=inputmat_total.device)
        else:
            dim_size = list(inputmat_total.size())
            dim_size[1] = weight.size(0)
            out = torch.empty(dim_size, dtype=activation_dtype, device=inputmat_total.device)

        if fp8:
            _ = fp8_gemm(
                weight_fp8._data, fp8_meta["scaling_fwd"].scale_inv, tex.FP8FwdTensors.GEMM1_WEIGHT,
                fp8_dtype_forward, inputmat_total, fp8_meta["scaling_fwd"].scale_inv,
                tex.FP8FwdTensors.GEMM1_INPUT, fp8_dtype_forward, activation_dtype, get_workspace(),
                bias=bias, use_bias=use_bias, use_split_accumulator=_2X_ACC_FPROP, out=out,
                ub_algo=tex.UbufOverlapAlgo.SPLIT_PIPELINED_RS if ub_overlap_rs else None,
                ub=ub_obj_projout if ub_overlap_rs else None,
                extra_output_tensor=rs_out if ub_overlap_rs else None,
            )
        else:
            weight = cast_if_needed(weight, activation_dtype)
            bias = cast_if_needed(bias, activation_dtype) if use_bias else bias
            _ = gemm(
                weight, inputmat_total, activation_dtype, get_workspace(), bias=bias, use_bias=use_bias, out=out,
                ub_algo=tex.UbufOverlapAlgo.SPLIT_PIPELINED_RS if ub_overlap_rs else None,
                ub=ub_obj_projout if ub_overlap_rs else None,
                extra_output_tensor=rs_out if ub_overlap_rs else None,
            )

        if is_grad_enabled:
            saved_inputmat = inputmat_no_fp8 if inputmat_t is None else None
            ctx.save_for_backward(saved_inputmat, inputmat_t, weight)
            ctx.activation_dtype = activation_dtype
            ctx.fp8 = fp8
            ctx.fp8_meta = fp8_meta
            ctx.use_bias = use_bias
            ctx.sequence_parallel = sequence_parallel
            ctx.tensor_parallel = tensor_parallel
            ctx.inp_shape = inp.shape
            ctx.parallel_mode = parallel_mode
            ctx.tp_group = tp_group
            ctx.requires_dgrad = inp.requires_grad

        # Row Parallel Linear
        if ub_overlap_rs:
            out = rs_out
        elif parallel_mode == "row" and sequence_parallel:
            out, _ = reduce_scatter_along_first_dim(out, tp_group)
        elif parallel_mode == "row" and tensor_parallel:
            out, _ = allreduce(out, tp_group)

        # [*, in_features] -> [*, out_features] except first dimension changes for SP
        return out.view(-1, *inp.shape[1:-1], out.shape[-1])


class Linear(TransformerEngineBaseModule):
    """Applies a linear transformation to the incoming data :math:`y = xA^T + b`"""

    def __init__(self, in_features: int, out_features: int, sequence_parallel: bool = False,
                 tp_group=None, tp_size: int = 1, parallel_mode: Optional[str] = None, bias: bool = True,
                 params_dtype: Optional[torch.dtype] = None, ub_overlap_rs: bool = False,
                 ub_name: Optional[str] = None) -> None:
        super().__init__()
        params_dtype = torch.get_default_dtype() if params_dtype is None else params_dtype
        self.in_features = in_features
        self.out_features = out_features
        self.use_bias = bias
        self.ub_overlap_rs = ub_overlap_rs
        self.ub_name = ub_name
        self.set_tensor_parallel_group(tp_group)
        self.tp_size = tp_size
        self.parallel_mode = parallel_mode
        self.sequence_parallel = (self.tp_size > 1) and sequence_parallel
        self.weight_tensor = torch.nn.Parameter(torch.empty(out_features, in_features, device="cuda", dtype=params_dtype))
        self.bias_tensor = torch.nn.Parameter(torch.empty(out_features, device="cuda", dtype=params_dtype))
        self.activation_dtype = params_dtype

    def get_fp8_weights_scratchpad(self, is_first_microbatch):
        return [None]

    def forward(self, inp: torch.Tensor, is_first_microbatch: Optional[bool] = None) -> torch.Tensor:
        with self.prepare_forward(inp, is_first_microbatch) as inp:
            (weight_fp8,) = self.get_fp8_weights_scratchpad(is_first_microbatch)

            if torch.is_grad_enabled():
                linear_fn = _Linear.apply
                args = []
            else:
                linear_fn = _Linear.forward
                args = [None]
            args += (
                self.weight_tensor,
                weight_fp8,
                inp,
                self.bias_tensor,
                self.use_bias,
                is_first_microbatch,
                self.fp8,
                self.fp8_meta,
                self.tp_group,
                self.sequence_parallel,
                self.tp_size > 1,
                self.activation_dtype,
                self.parallel_mode,
                torch.is_grad_enabled(),
                self.ub_overlap_rs,
                self.ub_name,
            )
            out = linear_fn(*args)
        return out
