# adapted from volcengine/verl verl/utils/ulysses.py
from typing import Optional

import torch
from torch import Tensor
import torch.distributed as dist
from torch.distributed import ProcessGroup

from ._sp_config import SPCommConfig, current_comm_config

_ULYSSES_SEQUENCE_PARALLEL_GROUP = None


def get_ulysses_sequence_parallel_group() -> Optional[dist.ProcessGroup]:
    return _ULYSSES_SEQUENCE_PARALLEL_GROUP


def all_to_all_tensor(local_tensor: Tensor, scatter_dim: int, gather_dim: int,
                      group: Optional[dist.ProcessGroup] = None, cfg: Optional[SPCommConfig] = None):
    group = get_ulysses_sequence_parallel_group() if group is None else group
    cfg = current_comm_config() if cfg is None else cfg
    seq_world_size = dist.get_world_size(group=group)
    input_tensor_list = [t for t in torch.tensor_split(local_tensor, seq_world_size, dim=scatter_dim)]
    if any(t.requires_grad for t in input_tensor_list):
        input_tensor_list = [t.contiguous() for t in input_tensor_list]
    output_tensor_list = [torch.empty_like(input_tensor_list[0]) for _ in range(seq_world_size)]
    use_async = cfg.async_a2a and seq_world_size > 1
    work = dist.all_to_all(output_tensor_list, input_tensor_list, group=group, async_op=use_async)
    if work is not None:
        work.wait()
    return torch.cat(output_tensor_list, dim=gather_dim)


def gather_seq_scatter_heads(x: Tensor, seq_dim: int, head_dim: int, group: ProcessGroup = None) -> Tensor:
    """[bsz, seq/n, h, ...] -> [bsz, seq, h/n, ...]"""
    group = get_ulysses_sequence_parallel_group() if group is None else group
    if not group:
        return x
    cfg = current_comm_config(num_chunks=2)
    num_chunks = cfg.num_chunks if cfg.async_a2a else 1
    if num_chunks == 1:
        return all_to_all_tensor(x, head_dim, seq_dim, group, cfg)
    outs = [all_to_all_tensor(chunk, head_dim, seq_dim, group, cfg)
            for chunk in x.chunk(num_chunks, dim=0)]
    return torch.cat(outs, dim=0)
