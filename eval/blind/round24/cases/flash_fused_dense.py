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
                sequence_parallel=True, async_gather=True, save_input=True):
        ctx.compute_weight_gradient = weight.requires_grad
        ctx.return_residual = return_residual
        ctx.process_group = process_group
        ctx.sequence_parallel = sequence_parallel

        if torch.is_autocast_enabled():
            x = x.to(dtype=torch.get_autocast_gpu_dtype())
        x = x.contiguous()
        if process_group is not None and sequence_parallel and async_gather:
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
        if ctx.compute_weight_gradient and save_input:
            ctx.save_for_backward(x, weight)
        else:
            ctx.save_for_backward(weight)
        return output if not return_residual else (output, x)

    @staticmethod
    @custom_bwd
    def backward(ctx, grad_output, *args):
        raise NotImplementedError


def fused_dense_func(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
                     return_residual: bool = False, process_group: Optional[ProcessGroup] = None,
                     sequence_parallel: bool = True):
    dtype_eligible = (x.dtype in [torch.float16, torch.bfloat16]
                      or (x.dtype == torch.float32 and torch.is_autocast_enabled()))
    grad_on = torch.is_grad_enabled()
    if x.is_cuda and weight.is_cuda and (bias is None or bias.is_cuda) and dtype_eligible:
        return FusedDenseFunc.apply(x, weight, bias, return_residual, process_group,
                                    sequence_parallel, grad_on, grad_on)
    else:
        assert process_group is None
        out = F.linear(x, weight, bias)
        return out if not return_residual else (out, x)


class ColumnParallelLinear(nn.Linear):

    def __init__(self, in_features, out_features, process_group, bias=True, sequence_parallel=True,
                 device=None, dtype=None) -> None:
        world_size = torch.distributed.get_world_size(process_group)
        super().__init__(in_features, out_features // world_size, bias=bias, device=device, dtype=dtype)
        self.process_group = process_group
        self.sequence_parallel = sequence_parallel

    def forward(self, x):
        return fused_dense_func(x, self.weight, self.bias, process_group=self.process_group,
                                sequence_parallel=self.sequence_parallel)
