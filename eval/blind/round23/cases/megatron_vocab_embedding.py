# adapted from NVIDIA/Megatron-LM megatron/core/tensor_parallel/layers.py
from typing import Callable, List, Optional

import torch
import torch.nn.functional as F
from torch.nn.parameter import Parameter

from megatron.core.model_parallel_config import ModelParallelConfig
from megatron.core.utils import get_pg_rank, get_pg_size, get_tensor_model_parallel_group_if_none

from .mappings import (
    gather_from_sequence_parallel_region,
    reduce_from_tensor_model_parallel_region,
    reduce_scatter_to_sequence_parallel_region,
)
from .utils import VocabUtility


class VocabParallelEmbedding(torch.nn.Module):
    def __init__(self, num_embeddings: int, embedding_dim: int, *, init_method: Callable,
                 reduce_scatter_embeddings: bool = False, config: ModelParallelConfig,
                 tp_group: Optional[torch.distributed.ProcessGroup] = None):
        super(VocabParallelEmbedding, self).__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.reduce_scatter_embeddings = reduce_scatter_embeddings
        self.tp_group = get_tensor_model_parallel_group_if_none(tp_group)
        (self.vocab_start_index, self.vocab_end_index) = (
            VocabUtility.vocab_range_from_global_vocab_size(
                self.num_embeddings, get_pg_rank(self.tp_group), get_pg_size(self.tp_group)
            )
        )
        self.num_embeddings_per_partition = self.vocab_end_index - self.vocab_start_index
        self.deterministic_mode = config.deterministic_mode
        self.weight = Parameter(
            torch.empty(self.num_embeddings_per_partition, self.embedding_dim,
                        device=torch.cuda.current_device(), dtype=config.params_dtype)
        )

    def forward(self, input_):
        if self.tp_group.size() > 1:
            input_mask = (input_ < self.vocab_start_index) | (input_ >= self.vocab_end_index)
            masked_input = input_.clone() - self.vocab_start_index
            masked_input[input_mask] = 0
        else:
            masked_input = input_
        if self.deterministic_mode or not torch.is_grad_enabled():
            # plain indexing gives the same values; only F.embedding's backward is non-deterministic
            output_parallel = self.weight[masked_input]
        else:
            output_parallel = F.embedding(masked_input, self.weight)
        if self.tp_group.size() > 1:
            output_parallel[input_mask, :] = 0.0

        if self.reduce_scatter_embeddings and torch.is_grad_enabled():
            output_parallel = output_parallel.transpose(0, 1).contiguous()
            output = reduce_scatter_to_sequence_parallel_region(output_parallel, group=self.tp_group)
        else:
            output = reduce_from_tensor_model_parallel_region(output_parallel, group=self.tp_group)
        return output


class LinearWithFrozenWeight(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, allreduce_dgrad, tp_group):
        ctx.save_for_backward(weight)
        ctx.allreduce_dgrad = allreduce_dgrad
        ctx.tp_group = tp_group
        output = torch.matmul(input, weight.t())
        if bias is not None:
            output = output + bias
        return output

    @staticmethod
    def backward(ctx, grad_output):
        (weight,) = ctx.saved_tensors
        grad_input = grad_output.matmul(weight)
        if ctx.allreduce_dgrad:
            torch.distributed.all_reduce(grad_input, group=ctx.tp_group)
        return grad_input, None, None, None, None


def linear_with_frozen_weight(input, weight, bias, gradient_accumulation_fusion: bool,
                              allreduce_dgrad: bool, sequence_parallel: bool,
                              tp_group: Optional[torch.distributed.ProcessGroup],
                              grad_output_buffer: Optional[List[torch.Tensor]] = None):
    tp_group = get_tensor_model_parallel_group_if_none(tp_group)
    if sequence_parallel:
        input = gather_from_sequence_parallel_region(input, tensor_parallel_output_grad=True, group=tp_group)
    allreduce_dgrad = allreduce_dgrad and torch.is_grad_enabled()
    args = [input, weight, bias, allreduce_dgrad, tp_group]
    return LinearWithFrozenWeight.apply(*args)
