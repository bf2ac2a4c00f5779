# adapted from volcengine/verl verl/utils/ulysses.py
from typing import Any, Optional

import torch
import torch.distributed as dist
from torch import Tensor
from torch.distributed import ProcessGroup

_ULYSSES_SEQUENCE_PARALLEL_GROUP = None
_ULYSSES_OVERLAP = False


def set_ulysses_sequence_parallel_group(group: dist.ProcessGroup):
    global _ULYSSES_SEQUENCE_PARALLEL_GROUP
    _ULYSSES_SEQUENCE_PARALLEL_GROUP = group


def get_ulysses_sequence_parallel_group() -> Optional[dist.ProcessGroup]:
    return _ULYSSES_SEQUENCE_PARALLEL_GROUP


def configure_overlap(overlap: bool) -> None:
    """Record whether the current micro-batch may overlap its all-to-alls."""
    global _ULYSSES_OVERLAP
    _ULYSSES_OVERLAP = overlap


def all_to_all_tensor(local_tensor: Tensor, scatter_dim: int, gather_dim: int,
                      group: Optional[dist.ProcessGroup] = None, async_op: bool = False):
    group = get_ulysses_sequence_parallel_group() if group is None else group
    seq_world_size = dist.get_world_size(group=group)
    input_tensor_list = [t.contiguous() for t in torch.tensor_split(local_tensor, seq_world_size, dim=scatter_dim)]
    output_tensor_list = [torch.empty_like(input_tensor_list[0]) for _ in range(seq_world_size)]
    comm = dist.all_to_all(output_tensor_list, input_tensor_list, group=group, async_op=async_op)
    if async_op:
        def wait():
            comm.wait()
            return torch.cat(output_tensor_list, dim=gather_dim).contiguous()
        return wait
    return torch.cat(output_tensor_list, dim=gather_dim).contiguous()


class SeqAllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, group, local_tensor: Tensor, scatter_dim: int, gather_dim: int, async_op=False) -> Tensor:
        ctx.group = group
        ctx.scatter_dim = scatter_dim
        ctx.gather_dim = gather_dim
        ctx.async_op = async_op
        return all_to_all_tensor(local_tensor, scatter_dim, gather_dim, group, async_op)

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Tensor):
        return (None, all_to_all_tensor(grad_outputs[0], ctx.gather_dim, ctx.scatter_dim, ctx.group, False),
                None, None, None)


def _pad_tensor(x: Tensor, dim: int, padding_size: int) -> Tensor:
    shape = list(x.shape)
    shape[dim] = padding_size
    pad = torch.zeros(shape, dtype=x.dtype, device=x.device)
    return torch.cat([x, pad], dim=dim)


def gather_heads_scatter_seq(x: Tensor, head_dim: int, seq_dim: int, group: ProcessGroup = None) -> Tensor:
    group = get_ulysses_sequence_parallel_group() if group is None else group
    if not group:
        return x
    dim_size = x.size(seq_dim)
    sp_world = dist.get_world_size(group)
    if dim_size % sp_world != 0:
        x = _pad_tensor(x, seq_dim, sp_world - (dim_size % sp_world))
    if _ULYSSES_OVERLAP and sp_world > 1:
        # split along heads and pipeline the two halves' all-to-alls
        first, second = x.chunk(2, dim=head_dim)
        pending = all_to_all_tensor(first, seq_dim, head_dim, group, async_op=True)
        second_out = SeqAllToAll.apply(group, second, seq_dim, head_dim, False)
        return torch.cat([pending(), second_out], dim=head_dim)
    return SeqAllToAll.apply(group, x, seq_dim, head_dim, False)
