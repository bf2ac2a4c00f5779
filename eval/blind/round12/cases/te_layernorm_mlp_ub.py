# adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/layernorm_mlp.py
import torch

import transformer_engine_torch as tex
from transformer_engine.pytorch.module.base import get_workspace, get_ub
from transformer_engine.pytorch.utils import clear_tensor_data
from transformer_engine.pytorch.distributed import (
    allreduce,
    reduce_scatter_along_first_dim,
    gather_along_first_dim,
)
from transformer_engine.pytorch.cpp_extensions import general_gemm


class _LayerNormMLP(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx,
        ln_out,
        fc1_weight,
        fc1_bias,
        fc2_weight,
        fc2_bias,
        activation_func,
        activation_dtype,
        tp_group,
        tp_world_size,
        sequence_parallel,
        set_parallel_mode,
        tensor_parallel,
        return_layernorm_output,
        is_grad_enabled,
        ub_overlap_ag,
        ub_overlap_rs,
    ):
        ub_overlap_ag = ub_overlap_ag and is_grad_enabled and not return_layernorm_output
        ub_overlap_rs = ub_overlap_rs and is_grad_enabled

        ub_obj_lnout = None
        if ub_overlap_ag:
            ub_obj_lnout = get_ub("fc1_fprop")
            ln_out_total = ub_obj_lnout.get_buffer(None, False)
        elif sequence_parallel:
            ln_out_total, _ = gather_along_first_dim(ln_out, tp_group)
        else:
            ln_out_total = ln_out

        fc1_out, *_ = general_gemm(
            fc1_weight,
            ln_out_total,
            get_workspace(),
            out_dtype=activation_dtype,
            bias=fc1_bias,
            ub=ub_obj_lnout,
            ub_type=tex.CommOverlapType.AG if ub_obj_lnout is not None else None,
        )
        if not is_grad_enabled and (ln_out_total is not ln_out):
            clear_tensor_data(ln_out_total)

        act_out = activation_func(fc1_out, None)

        ub_obj_fc2out = None
        rs_out = None
        dim_size = list(act_out.size())
        dim_size[1] = fc2_weight.size(0)
        if ub_overlap_rs:
            ub_obj_fc2out = get_ub("fc2_fprop")
            dim_size[0] = dim_size[0] // tp_world_size
            rs_out = torch.empty(dim_size, dtype=activation_dtype, device=act_out.device)
            fc2_out = ub_obj_fc2out.get_buffer(None)
        else:
            fc2_out = torch.empty(dim_size, dtype=activation_dtype, device=act_out.device)

        _ = general_gemm(
            fc2_weight,
            act_out,
            get_workspace(),
            out_dtype=activation_dtype,
            bias=fc2_bias,
            out=fc2_out,
            ub=ub_obj_fc2out,
            ub_type=tex.CommOverlapType.RS if ub_obj_fc2out is not None else None,
            extra_output=rs_out,
        )

        if is_grad_enabled:
            ctx.save_for_backward(ln_out, fc1_weight, fc1_out, fc2_weight, act_out)
            ctx.tp_group = tp_group
        else:
            clear_tensor_data(act_out, fc1_out)

        if rs_out is not None:
            fc2_out = rs_out
        elif set_parallel_mode and sequence_parallel:
            fc2_out, _ = reduce_scatter_along_first_dim(fc2_out, tp_group)
        elif set_parallel_mode and tensor_parallel:
            fc2_out, _ = allreduce(fc2_out, tp_group)
        return fc2_out
