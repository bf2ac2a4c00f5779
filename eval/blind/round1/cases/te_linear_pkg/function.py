"""_Linear autograd function (forward only), modelled on transformer_engine/pytorch/module/linear.py."""
from typing import Optional

import torch

import transformer_engine_torch as tex

from .comm import (
    allreduce,
    gather_along_first_dim,
    get_distributed_world_size,
    reduce_scatter_along_first_dim,
    symmetric_all_reduce,
)
from transformer_engine.pytorch.module.base import get_ub, get_workspace


class _Linear(torch.autograd.Function):
    """Linear semi-top level module
    Calls custom cuda extensions.
    """

    @staticmethod
    def forward(
        ctx,
        weight: torch.Tensor,
        inp: torch.Tensor,
        bias: Optional[torch.Tensor],
        is_first_microbatch: Optional[bool],
        fp8: bool,
        input_quantizer,
        weight_quantizer,
        tp_group,
        tp_size: int,
        sequence_parallel: bool,
        tensor_parallel: bool,
        activation_dtype: torch.dtype,
        parallel_mode: Optional[str],
        is_grad_enabled: bool,
        ub_overlap_rs_fprop: bool,
        ub_name: str,
        symmetric_ar_type: Optional[str],
    ) -> torch.Tensor:
        out_features, in_features = weight.shape
        inputmat = inp.view(-1, in_features)

        if fp8:
            input_quantizer.set_usage(rowwise=True, columnwise=is_grad_enabled and weight.requires_grad)
            inputmat = input_quantizer(inputmat)
            weight = weight_quantizer(weight)
        else:
            inputmat = inputmat.to(activation_dtype)
            weight = weight.to(activation_dtype)

        if parallel_mode == "column" and sequence_parallel:
            inputmat_total, _ = gather_along_first_dim(inputmat, tp_group)
        else:
            inputmat_total = inputmat

        tp_world_size = get_distributed_world_size(tp_group)
        ub_overlap_rs_fprop = ub_overlap_rs_fprop and is_grad_enabled and tp_world_size > 1

        ub_obj = None
        rs_out = None
        if ub_overlap_rs_fprop:
            ub_obj = get_ub(ub_name + "_fprop")
            out_shape = [inputmat_total.shape[0] // tp_world_size, out_features]
            rs_out = torch.empty(out_shape, dtype=activation_dtype, device=inputmat_total.device)

        out, *_, reduce_scatter_out = tex.general_gemm(
            weight,
            inputmat_total,
            get_workspace(),
            out_dtype=activation_dtype,
            bias=bias,
            ub=ub_obj,
            ub_type=tex.CommOverlapType.RS if ub_overlap_rs_fprop else None,
            extra_output=rs_out,
        )

        if is_grad_enabled:
            ctx.save_for_backward(inputmat, weight)
            ctx.activation_dtype = activation_dtype
            ctx.fp8 = fp8
            ctx.is_first_microbatch = is_first_microbatch
            ctx.sequence_parallel = sequence_parallel
            ctx.parallel_mode = parallel_mode
            ctx.tp_group = tp_group
            ctx.tp_size = tp_size
            ctx.requires_dgrad = inp.requires_grad

        if parallel_mode == "row":
            if ub_overlap_rs_fprop:
                out = reduce_scatter_out
            elif sequence_parallel:
                out, _ = reduce_scatter_along_first_dim(out, tp_group)
            elif tensor_parallel:
                if symmetric_ar_type is not None and is_grad_enabled:
                    out, _ = symmetric_all_reduce(out, tp_group, all_reduce_type=symmetric_ar_type)
                else:
                    out, _ = allreduce(out, tp_group)

        return out.view(-1, *inp.shape[1:-1], out.shape[-1])
