"""Forward of the fused LayerNorm + MLP autograd function with UserBuffers overlap."""
import torch

import transformer_engine_torch as tex
from transformer_engine.pytorch.cpp_extensions import general_gemm
from transformer_engine.pytorch.module.base import get_ub
from transformer_engine.pytorch.utils import clear_tensor_data


class _LayerNormMLP(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx, inp, ln_weight, ln_bias, fc1_weight, fc1_bias, fc2_weight, fc2_bias, eps,
        fc1_input_quantizer, fc1_weight_quantizer, fc2_input_quantizer, fc2_weight_quantizer,
        is_grad_enabled, activation, ub_overlap_ag, ub_overlap_rs, sequence_parallel, tp_group,
    ):
        in_features = ln_weight.numel()
        inp_shape = inp.shape
        inputmat = inp.view((-1, in_features))
        ub_overlap_rs = ub_overlap_rs and is_grad_enabled
        ub_overlap_ag = ub_overlap_ag and sequence_parallel

        if fc1_weight_quantizer is not None:
            fc1_weight_quantizer.set_usage(rowwise=True, columnwise=is_grad_enabled)
        ln_out, mu, rsigma = tex.layernorm_fwd(inputmat, ln_weight, ln_bias, eps, None, None, None, 0, True)

        ub_obj_lnout = get_ub("fc1_fprop") if ub_overlap_ag else None
        fc1_out, *_ = general_gemm(
            fc1_weight, ln_out, None, bias=fc1_bias, ub=ub_obj_lnout,
            ub_type=tex.CommOverlapType.AG if ub_overlap_ag else None,
        )
        act_out = activation(fc1_out)

        if ub_overlap_rs:
            ub_obj_fc2out = get_ub("fc2_fprop")
            rs_out = torch.empty(
                (act_out.shape[0] // ub_obj_fc2out.tp_size, fc2_weight.shape[0]),
                dtype=act_out.dtype, device=act_out.device,
            )
            fc2_out, *_ = general_gemm(
                fc2_weight, act_out, None, bias=fc2_bias, ub=ub_obj_fc2out,
                ub_type=tex.CommOverlapType.RS, extra_output=rs_out,
            )
            fc2_out = rs_out
        else:
            fc2_out, *_ = general_gemm(fc2_weight, act_out, None, bias=fc2_bias)
            if sequence_parallel:
                fc2_out = tex.reduce_scatter_along_first_dim(fc2_out, tp_group)
            else:
                torch.distributed.all_reduce(fc2_out, group=tp_group)

        if is_grad_enabled:
            ctx.save_for_backward(inputmat, ln_weight, ln_out, fc1_weight, fc1_out, fc2_weight, act_out, mu, rsigma)
            ctx.activation = activation
            ctx.sequence_parallel = sequence_parallel
            ctx.tp_group = tp_group
            ctx.inp_shape = inp_shape
        else:
            clear_tensor_data(fc1_out)
        return fc2_out.view(-1, *inp_shape[1:-1], fc2_out.shape[-1])

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError
