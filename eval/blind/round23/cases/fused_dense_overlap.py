# adapted from Dao-AILab/flash-attention flash_attn/ops/fused_dense.py
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor
from torch.distributed import ProcessGroup
from torch.cuda.amp import custom_bwd, custom_fwd

from flash_attn.utils.distributed import all_gather_raw, reduce_scatter_raw, all_reduce_raw


class FusedDenseFunc(torch.autograd.Function):

    @staticmethod
    @custom_fwd
    def forward(ctx, x, weight, bias, return_residual=False, process_group=None,
                sequence_parallel=True, overlap_allgather=True):
        ctx.compute_weight_gradient = weight.requires_grad
        ctx.return_residual = return_residual
        ctx.process_group = process_group
        ctx.sequence_parallel = sequence_parallel

        x = x.contiguous()
        if process_group is not None and sequence_parallel and overlap_allgather:
            # We want to kick off the all_gather early, before weight dtype conversion
            total_x, handle_x = all_gather_raw(x, process_group, async_op=True)
        elif process_group is not None and sequence_parallel:
            total_x, handle_x = all_gather_raw(x, process_group, async_op=False)
        else:
            total_x, handle_x = x, None
        weight = weight.contiguous()
        if handle_x is not None:
            handle_x.wait()
        output = F.linear(total_x, weight, bias)
        if ctx.compute_weight_gradient:
            ctx.save_for_backward(x, weight)
        else:
            ctx.save_for_backward(weight)
        return output if not return_residual else (output, x)

    @staticmethod
    @custom_bwd
    def backward(ctx, grad_output, *args):
        grad_output = grad_output.contiguous()
        if ctx.compute_weight_gradient:
            x, weight = ctx.saved_tensors
        else:
            weight, = ctx.saved_tensors
        grad_input = F.linear(grad_output, weight.t())
        if ctx.process_group is not None:
            reduce_fn = reduce_scatter_raw if ctx.sequence_parallel else all_reduce_raw
            grad_input, handle_grad_input = reduce_fn(grad_input, ctx.process_group, async_op=True)
            handle_grad_input.wait()
        return grad_input, None, None, None, None, None, None


def fused_dense_func(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
                     return_residual: bool = False, process_group: Optional[ProcessGroup] = None,
                     sequence_parallel: bool = True):
    dtype_eligible = (x.dtype in [torch.float16, torch.bfloat16]
                      or (x.dtype == torch.float32 and torch.is_autocast_enabled()))
    if x.is_cuda and weight.is_cuda and (bias is None or bias.is_cuda) and dtype_eligible:
        if x.requires_grad or weight.requires_grad:
            return FusedDenseFunc.apply(x, weight, bias, return_residual, process_group,
                                        sequence_parallel, torch.is_grad_enabled())
        with torch.no_grad():
            return FusedDenseFunc.forward(_NoCtx(), x, weight, bias, return_residual,
                                          process_group, sequence_parallel, True)
    else:
        assert process_group is None
        out = F.linear(x, weight, bias)
        return out if not return_residual else (out, x)


class _NoCtx:
    def save_for_backward(self, *tensors):
        pass


class ColumnParallelLinear(nn.Linear):

    def __init__(self, in_features: int, out_features: int, process_group: ProcessGroup,
                 bias: bool = True, sequence_parallel=True, device=None, dtype=None) -> None:
        world_size = torch.distributed.get_world_size(process_group)
        super().__init__(in_features, out_features // world_size, bias=bias,
                         device=device, dtype=dtype)
        self.process_group = process_group
        self.sequence_parallel = sequence_parallel

    def forward(self, x):
        return fused_dense_func(x, self.weight, self.bias, process_group=self.process_group,
                                sequence_parallel=self.sequence_parallel)
