# Modelled on verl verl/utils/ulysses.py
from typing import Any, Optional

import torch
import torch.distributed as dist
from torch import Tensor
from torch.distributed import ProcessGroup

_ULYSSES_SEQUENCE_PARALLEL_GROUP = None


def get_ulysses_sequence_parallel_group() -> Optional[ProcessGroup]:
    return _ULYSSES_SEQUENCE_PARALLEL_GROUP


def all_to_all_tensor(local_input: Tensor, scatter_dim: int, gather_dim: int,
                      group: Optional[dist.ProcessGroup] = None, async_op: bool = False):
    group = get_ulysses_sequence_parallel_group() if group is None else group
    seq_world_size = dist.get_world_size(group)
    input_list = [t.contiguous() for t in torch.tensor_split(local_input, seq_world_size, scatter_dim)]
    output_list = [torch.empty_like(input_list[0]) for _ in range(seq_world_size)]
    comm = dist.all_to_all(output_list, input_list, group=group, async_op=async_op)
    if async_op:
        def wait():
            comm.wait()
            return torch.cat(output_list, dim=gather_dim).contiguous()

        return wait
    return torch.cat(output_list, dim=gather_dim).contiguous()


def all_gather_tensor(local_tensor: Tensor, group: Optional[dist.ProcessGroup] = None, async_op: bool = False):
    group = get_ulysses_sequence_parallel_group() if group is None else group
    sp_world_size = dist.get_world_size(group=group)
    output_shape = list(local_tensor.shape)
    output_shape[0] = output_shape[0] * sp_world_size
    output = torch.empty(output_shape, dtype=local_tensor.dtype, device=local_tensor.device)
    dist.all_gather_into_tensor(output, local_tensor, group=group, async_op=async_op)
    return output


class SeqAllToAllQKV(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, group, q: Tensor, k: Tensor, v: Tensor, scatter_dim: int, gather_dim: int,
                async_op: bool = False):
        ctx.group = group
        ctx.scatter_dim = scatter_dim
        ctx.gather_dim = gather_dim
        if async_op:
            # issue all three all-to-alls back to back, then wait
            waits = [all_to_all_tensor(t, scatter_dim, gather_dim, group, async_op=True) for t in (q, k, v)]
            return tuple(w() for w in waits)
        return tuple(all_to_all_tensor(t, scatter_dim, gather_dim, group, False) for t in (q, k, v))

    @staticmethod
    def backward(ctx: Any, dq: Tensor, dk: Tensor, dv: Tensor):
        grads = [all_to_all_tensor(g.contiguous(), ctx.gather_dim, ctx.scatter_dim, ctx.group, False)
                 for g in (dq, dk, dv)]
        return (None, *grads, None, None, None)


class SeqAllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, group, local_input: Tensor, scatter_dim: int, gather_dim: int):
        ctx.group = group
        ctx.scatter_dim = scatter_dim
        ctx.gather_dim = gather_dim
        return all_to_all_tensor(local_input, scatter_dim, gather_dim, group, False)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor):
        return (None, all_to_all_tensor(grad_output, ctx.gather_dim, ctx.scatter_dim, ctx.group, False), None, None)


class Gather(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, group, local_tensor: Tensor, gather_dim: int, grad_scaler: bool = True) -> Tensor:
        ctx.group = group
        ctx.gather_dim = gather_dim
        ctx.grad_scaler = grad_scaler
        ctx.sp_world_size = dist.get_world_size(group=group)
        ctx.sp_rank = dist.get_rank(group=group)
        local_shape = list(local_tensor.size())
        split_size = local_shape[0]
        ctx.part_size = local_shape[gather_dim]
        output = all_gather_tensor(local_tensor, group, False)
        return torch.cat(output.split(split_size, dim=0), dim=gather_dim)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor):
        if ctx.grad_scaler:
            grad_output = grad_output * ctx.sp_world_size
        return (None, grad_output.split(ctx.part_size, dim=ctx.gather_dim)[ctx.sp_rank].contiguous(), None, None)


def gather_seq_scatter_heads_qkv(q: Tensor, k: Tensor, v: Tensor, seq_dim: int, head_dim: int,
                                 group: ProcessGroup = None, overlap: bool = False, grad_enabled: bool = True):
    """[bsz, seq/n, h, ...] -> [bsz, seq, h/n, ...] for q, k and v."""
    group = get_ulysses_sequence_parallel_group() if group is None else group
    if not group:
        return q, k, v
    async_op = overlap and grad_enabled
    return SeqAllToAllQKV.apply(group, q, k, v, head_dim, seq_dim, async_op)


def gather_heads_scatter_seq(x: Tensor, head_dim: int, seq_dim: int, group: ProcessGroup = None):
    """[bsz, seq, h/n, ...] -> [bsz, seq/n, h, ...]"""
    group = get_ulysses_sequence_parallel_group() if group is None else group
    if not group:
        return x
    return SeqAllToAll.apply(group, x, seq_dim, head_dim)


def gather_outputs_and_unpad(x: Tensor, gather_dim: int, unpad_dim: int = None, padding_size: int = 0,
                             grad_scaler: bool = True, group: Optional[dist.ProcessGroup] = None,
                             grad_enabled: bool = True):
    group = get_ulysses_sequence_parallel_group() if group is None else group
    if group is None:
        return x
    if grad_enabled:
        x = Gather.apply(group, x, gather_dim, grad_scaler)
    else:
        output = all_gather_tensor(x, group, False)
        x = torch.cat(output.split(x.shape[0], dim=0), dim=gather_dim)
    if unpad_dim is not None and padding_size:
        slc = [slice(None)] * len(x.shape)
        slc[unpad_dim] = slice(0, -padding_size)
        x = x[tuple(slc)]
    return x
