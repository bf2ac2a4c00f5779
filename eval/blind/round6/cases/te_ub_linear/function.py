import torch

import transformer_engine_torch as tex
from transformer_engine.pytorch.cpp_extensions import general_gemm
from transformer_engine.pytorch.distributed import gather_along_first_dim
from transformer_engine.pytorch.module.base import get_ub


class _Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, weight, inp, bias, args):
        inputmat = inp.view(-1, inp.shape[-1])
        ub_overlap_ag_fprop = args.ub_overlap_ag_fprop and args.is_grad_enabled and args.sequence_parallel
        if args.fp8 and args.input_quantizer is not None:
            args.input_quantizer.set_usage(rowwise=True, columnwise=args.is_grad_enabled and weight.requires_grad)
            inputmat = args.input_quantizer(inputmat)
        ub_obj = None
        ub_type = None
        if ub_overlap_ag_fprop:
            ub_obj = get_ub(args.ub_name + "_fprop")
            ub_type = tex.CommOverlapType.AG
            inputmat_total = ub_obj.get_buffer(args.input_quantizer, local_chunk=True)
            inputmat_total.copy_(inputmat)
        elif args.sequence_parallel:
            inputmat_total, _ = gather_along_first_dim(inputmat, args.tp_group)
        else:
            inputmat_total = inputmat
        out, *_ = general_gemm(weight, inputmat_total, None, bias=bias, ub=ub_obj, ub_type=ub_type)
        if args.is_grad_enabled:
            ctx.save_for_backward(inputmat, weight)
            ctx.args = args
            ctx.use_bias = bias is not None
            ctx.inp_shape = inp.shape
        return out.view(-1, *inp.shape[1:-1], out.shape[-1])

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError
