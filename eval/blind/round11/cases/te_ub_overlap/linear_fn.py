# Adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/linear.py (_Linear.forward).
import torch

import transformer_engine_torch as tex
from transformer_engine.pytorch.distributed import allreduce, gather_along_first_dim, reduce_scatter_along_first_dim
from transformer_engine.pytorch.module.base import get_ub, get_workspace

from .config import UbOverlapConfig


class _Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, weight, inp, bias, cfg: UbOverlapConfig, parallel_mode, sequence_parallel, tp_group):
        inputmat = inp.view(-1, inp.shape[-1])
        ub_obj = None
        if cfg.ag_fprop and cfg.grad_enabled:
            ub_obj = get_ub(cfg.ub_name + "_fprop")
            ub_obj.copy_input_to_ubuf(inputmat, True)
            inputmat_total = ub_obj.get_ubuf_output(1)
            ub_algo = tex.CommOverlapAlgo.SPLIT_PIPELINED_AG_P2P
        elif parallel_mode == "column" and sequence_parallel:
            inputmat_total, _ = gather_along_first_dim(inputmat, tp_group)
            ub_algo = None
        else:
            inputmat_total = inputmat
            ub_algo = None

        rs_algo = tex.CommOverlapAlgo.SPLIT_PIPELINED_RS if cfg.rs_fprop and cfg.grad_enabled else None
        out, _, _ = tex.gemm(weight, inputmat_total, inp.dtype, get_workspace(), bias=bias,
                             use_bias=bias is not None, ub_algo=ub_algo or rs_algo, ub=ub_obj)

        if rs_algo is None and parallel_mode == "row" and sequence_parallel:
            out, _ = reduce_scatter_along_first_dim(out, tp_group)
        elif rs_algo is None and parallel_mode == "row":
            out, _ = allreduce(out, tp_group)

        if cfg.grad_enabled:
            ctx.save_for_backward(inputmat, weight)
            ctx.parallel_mode = parallel_mode
            ctx.sequence_parallel = sequence_parallel
            ctx.tp_group = tp_group
        return out.view(-1, *inp.shape[1:-1], out.shape[-1])

    @staticmethod
    def backward(ctx, grad_output):
        inputmat, weight = ctx.saved_tensors
        grad_input = grad_output.reshape(-1, grad_output.shape[-1]) @ weight
        grad_weight = grad_output.reshape(-1, grad_output.shape[-1]).t() @ inputmat
        return grad_weight, grad_input.view_as(grad_output[..., : weight.shape[1]]), None, None, None, None, None
