# Modelled on TransformerEngine 2.x _linear_forward_impl (transformer_engine/pytorch/module/linear.py)
import torch

import transformer_engine_torch as tex
from transformer_engine.pytorch.cpp_extensions import general_gemm
from transformer_engine.pytorch.distributed import (
    allreduce,
    gather_along_first_dim,
    reduce_scatter_along_first_dim,
    symmetric_all_reduce,
)
from transformer_engine.pytorch.module.base import fill_userbuffers_buffer_for_all_gather, get_ub
from transformer_engine.pytorch.utils import cast_if_needed

from .fwd_args import LinearFwdArgs


def _linear_forward_impl(args: LinearFwdArgs):
    inp = args.inp
    weight = args.weight
    tp_group = args.tp_group
    is_grad_enabled = args.is_grad_enabled
    backward_needs_input = is_grad_enabled and args.weight_requires_grad

    out_features, in_features = weight.shape
    inputmat = cast_if_needed(inp.view((-1, in_features)), args.activation_dtype)

    with_ub_ag = all((args.ub_overlap_ag_fprop, args.sequence_parallel, args.is_grad_enabled))
    ub_obj = None
    ub_type = None
    if args.ub_overlap_rs_fprop:
        ub_obj = get_ub(args.ub_name + "_fprop", args.fp8)
        ub_type = tex.CommOverlapType.RS
    elif with_ub_ag:
        ub_obj = get_ub(args.ub_name + "_fprop", args.fp8)
        ub_type = tex.CommOverlapType.AG

    if args.fp8 and args.input_quantizer is not None:
        args.input_quantizer.set_usage(rowwise=True, columnwise=backward_needs_input)

    if args.parallel_mode == "column" and args.sequence_parallel:
        if with_ub_ag:
            inputmat_total, _ = fill_userbuffers_buffer_for_all_gather(
                ub_obj, inputmat, args.input_quantizer, tp_group
            )
        else:
            inputmat_total, _ = gather_along_first_dim(inputmat, tp_group, quantizer=args.input_quantizer)
    else:
        inputmat_total = inputmat

    weightmat = weight
    if args.fp8 and args.weight_quantizer is not None:
        columnwise_usage = is_grad_enabled and args.input_requires_grad and not args.is_fsdp2
        args.weight_quantizer.set_usage(rowwise=True, columnwise=columnwise_usage)
        weightmat = args.weight_quantizer(weight)

    gemm_out, *_, reduce_scatter_out = general_gemm(
        weightmat,
        inputmat_total,
        quantization_params=args.output_quantizer,
        out_dtype=args.activation_dtype,
        bias=args.bias,
        ub=ub_obj,
        ub_type=ub_type,
    )

    symmetric_ar_type = args.symmetric_ar_type if is_grad_enabled else None
    if args.ub_overlap_rs_fprop:
        out = reduce_scatter_out
    elif args.parallel_mode == "row" and args.tp_size > 1:
        out = gemm_out
        if args.sequence_parallel:
            out, _ = reduce_scatter_along_first_dim(out, tp_group)
        elif args.tensor_parallel:
            if symmetric_ar_type is not None:
                out, _ = symmetric_all_reduce(out, tp_group, all_reduce_type=symmetric_ar_type)
            else:
                out, _ = allreduce(out, tp_group)
    else:
        out = gemm_out
    out = out.view(-1, *inp.shape[1:-1], out_features)

    tensors_to_save = None
    if is_grad_enabled:
        saved_input = inputmat if backward_needs_input else None
        tensors_to_save = (saved_input, weightmat if args.input_requires_grad else None)
    return out, tensors_to_save
