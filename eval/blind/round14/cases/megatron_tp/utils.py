# adapted from NVIDIA/Megatron-LM megatron/core/tensor_parallel/utils.py
from typing import List, NamedTuple, Sequence

import torch

from megatron.core import parallel_state
from megatron.core.utils import divide


class CommPlan(NamedTuple):
    """Per-call communication choices for a tensor-parallel linear layer."""

    overlap_ag: bool
    sequence_parallel: bool
    use_global_buffer: bool


def build_comm_plan(config, sequence_parallel: bool) -> CommPlan:
    """Resolve the communication options of one forward call from the config."""
    grad_enabled = torch.is_grad_enabled()
    return CommPlan(
        overlap_ag=config.tp_comm_overlap_ag and sequence_parallel and grad_enabled,
        sequence_parallel=sequence_parallel,
        use_global_buffer=config.use_global_memory_buffer,
    )


def split_tensor_along_last_dim(
    tensor: torch.Tensor,
    num_partitions: int,
    contiguous_split_chunks: bool = False,
) -> List[torch.Tensor]:
    """Split a tensor along its last dimension."""
    last_dim = tensor.dim() - 1
    last_dim_size = divide(tensor.size()[last_dim], num_partitions)
    tensor_list = torch.split(tensor, last_dim_size, dim=last_dim)
    if contiguous_split_chunks:
        return tuple(chunk.contiguous() for chunk in tensor_list)
    return tensor_list


def split_tensor_into_1d_equal_chunks(tensor, new_buffer=False):
    """Break a tensor into equal 1D chunks across tensor parallel ranks."""
    partition_size = torch.numel(tensor) // parallel_state.get_tensor_model_parallel_world_size()
    start_index = partition_size * parallel_state.get_tensor_model_parallel_rank()
    end_index = start_index + partition_size
    if new_buffer:
        data = torch.empty(partition_size, dtype=tensor.dtype, device=torch.cuda.current_device(), requires_grad=False)
        data.copy_(tensor.view(-1)[start_index:end_index])
    else:
        data = tensor.view(-1)[start_index:end_index]
    return data


class VocabUtility:
    """Split the vocabulary into `world_size` chunks."""

    @staticmethod
    def vocab_range_from_per_partition_vocab_size(per_partition_vocab_size: int, rank, world_size: int) -> Sequence[int]:
        index_f = rank * per_partition_vocab_size
        index_l = index_f + per_partition_vocab_size
        return index_f, index_l
