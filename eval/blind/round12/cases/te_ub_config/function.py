# adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/layernorm_mlp.py
import torch

import transformer_engine_torch as tex
from transformer_engine.pytorch.module.base import get_workspace, get_ub
from transformer_engine.pytorch.distributed import gather_along_first_dim, reduce_scatter_along_first_dim
from transformer_engine.pytorch.cpp_extensions import general_gemm

from .config import ForwardCommConfig


class _Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inp, weight, bias, cfg: ForwardCommConfig, tp_group, activation_dtype):
        ub_obj = None
        if cfg.overlap_ag:
            ub_obj = get_ub("qkv_fprop")
            inputmat_total = ub_obj.get_buffer(None, False)
        elif cfg.sequence_parallel:
            inputmat_total, _ = gather_along_first_dim(inp, tp_group)
        else:
            inputmat_total = inp

        out, *_ = general_gemm(
            weight,
            inputmat_total,
            get_workspace(),
            out_dtype=activation_dtype,
            bias=bias,
            ub=ub_obj,
            ub_type=tex.CommOverlapType.AG if ub_obj is not None else None,
        )

        if cfg.overlap_rs:
            ub_rs = get_ub("proj_fprop")
            out = ub_rs.reduce_scatter(out)
        elif cfg.sequence_parallel:
            out, _ = reduce_scatter_along_first_dim(out, tp_group)

        if cfg.save_for_backward:
            ctx.save_for_backward(inp, weight)
            ctx.tp_group = tp_group
        return out
