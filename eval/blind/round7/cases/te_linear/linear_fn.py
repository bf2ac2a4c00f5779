import torch

from transformer_engine.pytorch.cpp_extensions import general_gemm
from transformer_engine.pytorch.distributed import reduce_scatter_along_first_dim, allreduce
from transformer_engine.pytorch.module.base import get_ub, get_workspace, _2X_ACC_FPROP


class _Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, weight, inp, bias, is_first_microbatch, fp8, input_quantizer, weight_quantizer,
                tp_group, tp_size, sequence_parallel, parallel_mode, is_grad_enabled,
                ub_overlap_rs_fprop, ub_name):
        inputmat = inp.view(-1, inp.shape[-1])
        if fp8 and weight_quantizer is not None:
            weight_quantizer.set_usage(rowwise=True, columnwise=is_grad_enabled)
            weightmat = weight_quantizer(weight)
        else:
            weightmat = weight

        ub_obj = None
        if ub_overlap_rs_fprop and is_grad_enabled:
            ub_obj = get_ub(ub_name + "_fprop")

        out, *_ = general_gemm(
            weightmat,
            inputmat,
            get_workspace(),
            bias=bias,
            use_split_accumulator=_2X_ACC_FPROP if is_grad_enabled else False,
            ub=ub_obj,
            ub_type="RS" if ub_obj is not None else None,
        )

        if ub_obj is None and parallel_mode == "row":
            if sequence_parallel:
                out, _ = reduce_scatter_along_first_dim(out, tp_group)
            elif tp_size > 1:
                out, _ = allreduce(out, tp_group)

        if is_grad_enabled:
            ctx.save_for_backward(inputmat, weightmat)
            ctx.tp_group = tp_group
            ctx.sequence_parallel = sequence_parallel
            ctx.is_first_microbatch = is_first_microbatch
        return out.view(*inp.shape[:-1], out.shape[-1])
