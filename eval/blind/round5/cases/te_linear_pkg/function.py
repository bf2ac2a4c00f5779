"""_Linear autograd Function modelled on transformer_engine/pytorch/module/linear.py."""
import torch

import transformer_engine_torch as tex
from transformer_engine.pytorch.cpp_extensions import general_gemm

from .utils import _fsdp_scatter_tensors, get_ub, reduce_scatter_along_first_dim


class _Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, weight, inp, bias, is_first_microbatch, input_quantizer, weight_quantizer,
                fuse_wgrad_accumulation, tp_group, tp_size, sequence_parallel, parallel_mode,
                is_grad_enabled, ub_overlap_rs_fprop, ub_name, fsdp_group):
        out_features, in_features = weight.shape
        inputmat = inp.view(-1, in_features)

        # UserBuffers reduce-scatter overlap of the fprop GEMM (row-parallel + SP)
        ub_overlap_rs_fprop = ub_overlap_rs_fprop and is_grad_enabled
        ub_obj = get_ub(ub_name + "_fprop") if ub_overlap_rs_fprop else None

        backward_needs_input = is_grad_enabled and weight.requires_grad
        if input_quantizer is not None:
            input_quantizer.set_usage(rowwise=True, columnwise=backward_needs_input)

        out, *_ = general_gemm(
            weight,
            inputmat,
            out_dtype=inp.dtype,
            bias=bias,
            ub=ub_obj,
            ub_type=tex.CommOverlapType.RS if ub_overlap_rs_fprop else None,
        )
        if not ub_overlap_rs_fprop and parallel_mode == "row":
            if sequence_parallel:
                out, _ = reduce_scatter_along_first_dim(out, tp_group)
            else:
                torch.distributed.all_reduce(out, group=tp_group)

        if is_grad_enabled:
            saved_inputmat = inputmat if backward_needs_input else None
            # Scatter intermediate/activation tensors saved for the backward pass
            ctx.fsdp_group = fsdp_group
            ctx.fsdp_shapes = _fsdp_scatter_tensors(fsdp_group, saved_inputmat)
            ctx.save_for_backward(saved_inputmat, weight)
            ctx.fuse_wgrad_accumulation = fuse_wgrad_accumulation
            ctx.is_first_microbatch = is_first_microbatch
            ctx.tp_group = tp_group
            ctx.sequence_parallel = sequence_parallel

        return out.view(-1, *inp.shape[1:-1], out_features)

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError
