# Modeled on flash-attention flash_attn/ops/fused_dense.py (fused_dense_func,
# ColumnParallelLinear with sequence parallel all-gather).
from typing import Optional

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed import ProcessGroup


def all_gather_raw(input_, process_group, async_op=False):
    world_size = dist.get_world_size(process_group)
    output = torch.empty(world_size * input_.shape[0], *input_.shape[1:], dtype=input_.dtype, device=input_.device)
    handle = dist.all_gather_into_tensor(output, input_.contiguous(), group=process_group, async_op=async_op)
    return output, handle


class FusedDenseFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, return_residual=False, process_group=None, sequence_parallel=True):
        ctx.return_residual = return_residual
        ctx.process_group = process_group
        ctx.sequence_parallel = sequence_parallel
        if process_group is not None and sequence_parallel:
            total_x, handle_x = all_gather_raw(x, process_group, async_op=True)
            handle_x.wait()
        else:
            total_x = x
        ctx.save_for_backward(x, weight)
        output = F.linear(total_x, weight, bias)
        return output if not return_residual else (output, x)

    @staticmethod
    def backward(ctx, grad_output, *args):
        raise NotImplementedError


def fused_dense_func(x, weight, bias=None, return_residual=False,
                     process_group: Optional[ProcessGroup] = None, sequence_parallel: bool = True):
    dtype_eligible = x.dtype in [torch.float16, torch.bfloat16] or (
        x.dtype == torch.float32 and torch.is_autocast_enabled()
    )
    if x.is_cuda and weight.is_cuda and (bias is None or bias.is_cuda) and dtype_eligible and torch.is_grad_enabled():
        return FusedDenseFunc.apply(x, weight, bias, return_residual, process_group, sequence_parallel)
    out = F.linear(x, weight, bias)
    return out if not return_residual else (out, x)


class ColumnParallelLinear(nn.Linear):
    def __init__(self, in_features, out_features, process_group: ProcessGroup, bias=True,
                 sequence_parallel=True, device=None, dtype=None):
        world_size = dist.get_world_size(process_group)
        super().__init__(in_features, out_features // world_size, bias=bias, device=device, dtype=dtype)
        self.process_group = process_group
        self.sequence_parallel = sequence_parallel

    def forward(self, x):
        return fused_dense_func(
            x, self.weight, self.bias,
            process_group=self.process_group,
            sequence_parallel=self.sequence_parallel,
        )
