# Modelled on transformer_engine/pytorch/module/layernorm_linear.py _LayerNormLinear.forward (TE 1.11).
import torch

import transformer_engine_torch as tex
from transformer_engine.pytorch.cpp_extensions import fp8_gemm, gemm
from transformer_engine.pytorch.distributed import gather_along_first_dim
from transformer_engine.pytorch.module._common import _apply_normalization
from transformer_engine.pytorch.module.base import get_ub

from .utils import get_distributed_world_size


class _LayerNormLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inp, ln_weight, ln_bias, weight, bias, eps, fp8, fp8_meta, tp_group, sequence_parallel,
                activation_dtype, parallel_mode, return_layernorm_output, ub_overlap_ag, ub_name, normalization,
                is_grad_enabled):
        in_features = ln_weight.numel()
        inputmat = inp.view((-1, in_features))
        fp8_dtype_forward = tex.DType.kFloat8E4M3

        if ub_overlap_ag:
            tp_world_size = get_distributed_world_size(tp_group)
            if tp_world_size == 1 or (not is_grad_enabled):
                ub_overlap_ag = False
        if ub_overlap_ag:
            ub_obj_lnout = get_ub(ub_name + "_fprop")
            ln_out = ub_obj_lnout.get_ubuf_output(0)
        else:
            ln_out = torch.empty_like(inputmat, dtype=torch.uint8 if fp8 else activation_dtype)

        ln_out, mu, rsigma = _apply_normalization(inputmat, ln_out, ln_weight, ln_bias, eps, fp8, fp8_meta,
                                                  normalization, 0, False, False)
        if ub_overlap_ag:
            ln_out_total = ub_obj_lnout.get_ubuf_output(1)
        elif parallel_mode == "column" and sequence_parallel:
            ln_out_total, _ = gather_along_first_dim(ln_out, tp_group)
        else:
            ln_out_total = ln_out

        if fp8:
            out, _ = fp8_gemm(weight, fp8_meta["scaling_fwd"].scale_inv, 0, fp8_dtype_forward, ln_out_total,
                              fp8_meta["scaling_fwd"].scale_inv, 1, fp8_dtype_forward, activation_dtype,
                              None, bias=bias, use_bias=bias is not None,
                              ub_algo=tex.UbufOverlapAlgo.SPLIT_PIPELINED_AG_P2P if ub_overlap_ag else None,
                              ub=ub_obj_lnout if ub_overlap_ag else None)
        else:
            out, _, _ = gemm(weight, ln_out_total, activation_dtype, None, bias=bias, use_bias=bias is not None,
                             ub_algo=tex.UbufOverlapAlgo.SPLIT_PIPELINED_AG_P2P if ub_overlap_ag else None,
                             ub=ub_obj_lnout if ub_overlap_ag else None)

        if is_grad_enabled:
            ln_out_t = tex.fp8_transpose(ln_out_total, fp8_dtype_forward) if fp8 else None
            ctx.save_for_backward(inputmat, ln_weight, mu, rsigma, weight, ln_out, ln_out_t)
            ctx.activation_dtype = activation_dtype
            ctx.fp8 = fp8
            ctx.ub_overlap_ag = ub_overlap_ag
        out = out.view(-1, *inp.shape[1:-1], out.shape[-1])
        if return_layernorm_output:
            return out, ln_out.view_as(inp)
        return out

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError
