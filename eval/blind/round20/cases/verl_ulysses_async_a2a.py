# adapted from volcengine/verl verl/utils/ulysses.py
from typing import Any, Optional, Tuple

import torch
from torch import Tensor
import torch.distributed as dist
from torch.distributed import ProcessGroup


class _SPState:
    group: Optional[dist.ProcessGroup] = None


_SP_STATE = _SPState()


def set_ulysses_sequence_parallel_group(group: dist.ProcessGroup):
    _SP_STATE.group = group


def get_ulysses_sequence_parallel_world_size(group: ProcessGroup = None) -> int:
    return dist.get_world_size(group) if group else 1


def _pad_tensor(x: Tensor, dim: int, padding_size: int) -> Tensor:
    shape = list(x.shape)
    shape[dim] = padding_size
    pad = torch.zeros(shape, dtype=x.dtype, device=x.device)
    return torch.cat([x, pad], dim=dim)


def _unpad_tensor(x: Tensor, dim: int, padding_size: int) -> Tensor:
    slc = [slice(None)] * len(x.shape)
    slc[dim] = slice(0, -padding_size)
    return x[slc]


def gather_seq_scatter_heads(x: Tensor, seq_dim: int, head_dim: int, unpadded_dim_size: int = 0,
                             group: ProcessGroup = None) -> Tensor:
    """
    gather sequence dimension and scatter head dim:
    [bsz, seq/n, h, ...] -> [bsz, seq, h/n, ...]
    """
    if group is None:
        group = getattr(_SP_STATE, "group", None) if torch.is_grad_enabled() else None
    if not group:
        return x
    sp_world = get_ulysses_sequence_parallel_world_size(group)
    x = SeqAllToAll.apply(group, x, head_dim, seq_dim)
    if unpadded_dim_size and unpadded_dim_size % sp_world != 0:
        padding_size = x.size(seq_dim) - unpadded_dim_size
        x = _unpad_tensor(x, seq_dim, padding_size)
    return x


def gather_heads_scatter_seq(x: Tensor, head_dim: int, seq_dim: int, group: ProcessGroup = None) -> Tensor:
    """
    gather head dimension and scatter seq dim:
    [bsz, seq, h/n, ...] -> [bsz, seq/n, h, ...]
    """
    group = _SP_STATE.group if group is None else group
    if not group:
        return x
    dim_size = x.size(seq_dim)
    sp_world = get_ulysses_sequence_parallel_world_size(group)
    if dim_size % sp_world != 0:
        padding_size = sp_world - (dim_size % sp_world)
        x = _pad_tensor(x, seq_dim, padding_size)
    return SeqAllToAll.apply(group, x, seq_dim, head_dim, torch.is_grad_enabled())


def all_to_all_tensor(local_tensor: Tensor, scatter_dim: int, gather_dim: int,
                      group: Optional[dist.ProcessGroup] = None, async_op: bool = False):
    seq_world_size = dist.get_world_size(group=group)
    input_tensor_list = [t for t in torch.tensor_split(local_tensor, seq_world_size, dim=scatter_dim)]
    output_tensor_list = [torch.empty_like(input_tensor_list[0]) for _ in range(seq_world_size)]
    comm = dist.all_to_all(output_tensor_list, input_tensor_list, group=group, async_op=async_op)
    if comm is not None:
        comm.wait()
    return torch.cat(output_tensor_list, dim=gather_dim)


class SeqAllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, group: dist.ProcessGroup, local_tensor: Tensor, scatter_dim: int, gather_dim: int,
                async_op=False) -> Tensor:
        ctx.group = group
        ctx.scatter_dim = scatter_dim
        ctx.gather_dim = gather_dim
        ctx.async_op = async_op
        return all_to_all_tensor(local_tensor, scatter_dim, gather_dim, group, async_op)

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Tensor) -> Tuple[None, Tensor, None, None, None]:
        return (None, all_to_all_tensor(grad_outputs[0], ctx.gather_dim, ctx.scatter_dim, ctx.group, ctx.async_op),
                None, None, None)


def ulysses_pad_and_slice_inputs(input_ids_rmpad: torch.Tensor, position_ids_rmpad: Optional[torch.Tensor],
                                 sp_size: int):
    if position_ids_rmpad is not None:
        assert position_ids_rmpad.size(0) == 1
        assert input_ids_rmpad.size(1) == position_ids_rmpad.size(1)
    if torch.is_inference_mode_enabled():
        # rollout workers must hand us explicit positions; padding ids would be guessed otherwise
        assert position_ids_rmpad is not None, "position_ids are required under inference_mode"
    if sp_size <= 1:
        return input_ids_rmpad, position_ids_rmpad, 0
    _, total_seq_len = input_ids_rmpad.shape
    pad_size = (sp_size - total_seq_len % sp_size) % sp_size
    if pad_size > 0:
        input_ids_rmpad = torch.nn.functional.pad(input_ids_rmpad, (0, pad_size), value=0)
        if position_ids_rmpad is not None:
            pad_pos_ids = torch.arange(pad_size, device=position_ids_rmpad.device).unsqueeze(0)
            position_ids_rmpad = torch.cat((position_ids_rmpad, pad_pos_ids), dim=-1)
    return input_ids_rmpad, position_ids_rmpad, pad_size
