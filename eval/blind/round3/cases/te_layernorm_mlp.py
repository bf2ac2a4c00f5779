# Modelled on transformer_engine/pytorch/module/layernorm_mlp.py (TransformerEngine 2.x).
import torch

import transformer_engine_torch as tex
from transformer_engine.pytorch.cpp_extensions import general_gemm
from transformer_engine.pytorch.distributed import gather_along_first_dim, reduce_scatter_along_first_dim
from transformer_engine.pytorch.jit import bias_gelu_fused
from transformer_engine.pytorch.module._common import apply_normalization
from transformer_engine.pytorch.module.base import get_ub


class _LayerNormMLP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inp, ln_weight, ln_bias, fc1_weight, fc1_bias, fc2_weight, fc2_bias, eps,
                is_first_microbatch, fp8, tp_group, tp_size, sequence_parallel, tensor_parallel,
                activation_dtype, return_layernorm_output, bias_gelu_fusion, set_parallel_mode,
                is_grad_enabled, fwd_ln_sm_margin, ub_overlap_ag, ub_overlap_rs, ub_overlap_rs_dgrad,
                ub_bulk_dgrad, ub_bulk_wgrad, gemm_gelu_fusion, normalization, activation, fc1_input_quantizer,
                fc2_input_quantizer):
        in_features, inp_shape = ln_weight.numel(), inp.shape
        inputmat = inp.view((-1, in_features))

        ub_overlap_ag = ub_overlap_ag and is_grad_enabled and not return_layernorm_output
        ub_overlap_rs = ub_overlap_rs and is_grad_enabled
        backwards_needs_fc1_input = is_grad_enabled and fc1_weight.requires_grad

        with_input_all_gather_nccl = sequence_parallel and set_parallel_mode and not ub_overlap_ag
        ub_obj_lnout = get_ub("fc1_fprop") if ub_overlap_ag else None

        ln_out, mu, rsigma = apply_normalization(
            inputmat, None, ln_weight, ln_bias, eps, None, None, activation_dtype, normalization,
            fwd_ln_sm_margin, zero_centered_gamma=False,
        )
        if fc1_input_quantizer is not None:
            fc1_input_quantizer.set_usage(rowwise=True, columnwise=backwards_needs_fc1_input)

        if with_input_all_gather_nccl:
            ln_out_total, _ = gather_along_first_dim(ln_out, tp_group, quantizer=fc1_input_quantizer)
        elif ub_overlap_ag:
            ub_obj_lnout.copy_into_buffer(ln_out, fc1_input_quantizer, local_chunk=True)
            ln_out_total = ub_obj_lnout.get_buffer(fc1_input_quantizer)
        else:
            ln_out_total = ln_out

        use_bias_gelu_fusion = bias_gelu_fusion and activation == "gelu" and is_grad_enabled
        if use_bias_gelu_fusion:
            fc1_out_without_bias, *_ = general_gemm(fc1_weight, ln_out_total, out_dtype=activation_dtype,
                                                    ub=ub_obj_lnout,
                                                    ub_type=tex.CommOverlapType.AG if ub_overlap_ag else None)
            act_out = bias_gelu_fused(fc1_out_without_bias, fc1_bias)
        else:
            fc1_out, *_ = general_gemm(fc1_weight, ln_out_total, out_dtype=activation_dtype, bias=fc1_bias,
                                       ub=ub_obj_lnout,
                                       ub_type=tex.CommOverlapType.AG if ub_overlap_ag else None)
            act_out = torch.nn.functional.gelu(fc1_out, approximate="tanh")

        ub_obj_fc2out = get_ub("fc2_fprop") if ub_overlap_rs else None
        fc2_out, *_, rs_out = general_gemm(fc2_weight, act_out, out_dtype=activation_dtype, bias=fc2_bias,
                                           ub=ub_obj_fc2out,
                                           ub_type=tex.CommOverlapType.RS if ub_overlap_rs else None)
        if ub_overlap_rs:
            out = rs_out
        elif set_parallel_mode and sequence_parallel:
            out, _ = reduce_scatter_along_first_dim(fc2_out, tp_group)
        elif set_parallel_mode and tensor_parallel:
            torch.distributed.all_reduce(fc2_out, group=tp_group)
            out = fc2_out
        else:
            out = fc2_out

        if is_grad_enabled:
            ctx.save_for_backward(inputmat, ln_weight, mu, rsigma, ln_out if backwards_needs_fc1_input else None,
                                  fc1_weight, act_out, fc2_weight)
            ctx.activation = activation
            ctx.bias_gelu_fusion = use_bias_gelu_fusion
        out = out.view(-1, *inp_shape[1:-1], out.shape[-1])
        if return_layernorm_output:
            return out, ln_out.view(inp_shape)
        return out

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError
