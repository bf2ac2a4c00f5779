"""Column-parallel linear with an all-gather fused into the GEMM (async tensor parallelism).

Modelled on torch.distributed._symmetric_memory.fused_all_gather_matmul as used by torchtitan's
async-TP, wrapped in an autograd Function so both paths are differentiable.
"""
from typing import Any, Dict

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.nn as nn


class _AllGatherMatmul(torch.autograd.Function):

    @staticmethod
    def forward(ctx, x_shard, weight, group, gather_dim, use_symm_mem, save_total_input):
        if use_symm_mem:
            x_full, (out,) = torch.ops.symm_mem.fused_all_gather_matmul(
                x_shard, [weight.t()], gather_dim, group.group_name
            )
        else:
            x_full = funcol.all_gather_tensor(x_shard, gather_dim, group).wait()
            out = x_full @ weight.t()
        if save_total_input:
            ctx.save_for_backward(x_full, weight)
        else:
            ctx.save_for_backward(x_shard, weight)
        ctx.save_total_input = save_total_input
        ctx.group = group
        ctx.gather_dim = gather_dim
        return out

    @staticmethod
    def backward(ctx, grad_out):
        saved, weight = ctx.saved_tensors
        if ctx.save_total_input:
            x_full = saved
        else:
            x_full = funcol.all_gather_tensor(saved, ctx.gather_dim, ctx.group).wait()
        grad_weight = grad_out.flatten(0, -2).t() @ x_full.flatten(0, -2)
        grad_x_full = grad_out @ weight
        grad_x = funcol.reduce_scatter_tensor(grad_x_full, "sum", ctx.gather_dim, ctx.group).wait()
        return grad_x, grad_weight, None, None, None, None


def all_gather_matmul(x_shard, weight, *, group, gather_dim, enable_symm_mem, is_grad_enabled, save_total_input):
    use_symm_mem = enable_symm_mem and is_grad_enabled and x_shard.is_cuda
    return _AllGatherMatmul.apply(x_shard, weight, group, gather_dim, use_symm_mem, save_total_input)


class AsyncTPColumnLinear(nn.Module):

    def __init__(self, in_features, out_features, tp_group: dist.ProcessGroup, enable_async_tp=True,
                 keep_gathered_input=False):
        super().__init__()
        tp_size = dist.get_world_size(tp_group)
        self.weight = nn.Parameter(torch.empty(out_features // tp_size, in_features))
        self.tp_group = tp_group
        self.enable_async_tp = enable_async_tp
        self.keep_gathered_input = keep_gathered_input

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        comm_kwargs: Dict[str, Any] = {
            "group": self.tp_group,
            "gather_dim": 0,
            "enable_symm_mem": self.enable_async_tp,
            "is_grad_enabled": torch.is_grad_enabled(),
        }
        comm_kwargs["save_total_input"] = self.keep_gathered_input and comm_kwargs["is_grad_enabled"]
        return all_gather_matmul(x, self.weight, **comm_kwargs)
