# adapted from volcengine/verl verl/utils/ulysses.py
from typing import Any, Optional, Tuple

import torch
from torch import Tensor
import torch.distributed as dist

from . import parallel_state as ps


def _pad_tensor(x: Tensor, dim: int, padding_size: int) -> Tensor:
    shape = list(x.shape)
    shape[dim] = padding_size
    pad = torch.zeros(shape, dtype=x.dtype, device=x.device)
    return torch.cat([x, pad], dim=dim)


def _unpad_tensor(x: Tensor, dim: int, padding_size: int) -> Tensor:
    slc = [slice(None)] * len(x.shape)
    slc[dim] = slice(0, -padding_size)
    return x[slc]


def all_to_all_tensor(local_tensor: Tensor, scatter_dim: int, gather_dim: int, group=None):
    group = ps.get_ulysses_sequence_parallel_group() if group is None else group
    seq_world_size = dist.get_world_size(group=group)
    input_tensor_list = [t for t in torch.tensor_split(local_tensor, seq_world_size, dim=scatter_dim)]
    output_tensor_list = [torch.empty_like(input_tensor_list[0]) for _ in range(seq_world_size)]
    if ps.async_all_to_all_enabled():
        work = dist.all_to_all(output_tensor_list, input_tensor_list, group=group, async_op=True)
        work.wait()
    else:
        dist.all_to_all(output_tensor_list, input_tensor_list, group=group)
    return torch.cat(output_tensor_list, dim=gather_dim)


class SeqAllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, group, local_tensor: Tensor, scatter_dim: int, gather_dim: int) -> Tensor:
        ctx.group = group
        ctx.scatter_dim = scatter_dim
        ctx.gather_dim = gather_dim
        return all_to_all_tensor(local_tensor, scatter_dim, gather_dim, group)

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Tensor) -> Tuple[None, Tensor, None, None]:
        return (None, all_to_all_tensor(grad_outputs[0], ctx.gather_dim, ctx.scatter_dim, ctx.group), None, None)


def gather_seq_scatter_heads(x: Tensor, seq_dim: int, head_dim: int, unpadded_dim_size: int = 0, group=None) -> Tensor:
    group = ps.get_ulysses_sequence_parallel_group() if group is None else group
    if not group:
        return x
    sp_world = ps.get_ulysses_sequence_parallel_world_size(group)
    x = SeqAllToAll.apply(group, x, head_dim, seq_dim)
    if unpadded_dim_size and unpadded_dim_size % sp_world != 0:
        padding_size = x.size(seq_dim) - unpadded_dim_size
        x = _unpad_tensor(x, seq_dim, padding_size)
    return x


def gather_heads_scatter_seq(x: Tensor, head_dim: int, seq_dim: int, group=None) -> Tensor:
    group = ps.get_ulysses_sequence_parallel_group() if group is None else group
    if not group:
        return x
    if not x.requires_grad:
        x = x.contiguous()
    dim_size = x.size(seq_dim)
    sp_world = ps.get_ulysses_sequence_parallel_world_size(group)
    if dim_size % sp_world != 0:
        x = _pad_tensor(x, seq_dim, sp_world - (dim_size % sp_world))
    return SeqAllToAll.apply(group, x, seq_dim, head_dim)
