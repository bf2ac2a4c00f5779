from typing import Optional

import torch

from megatron.core.parallel_state import (
    get_tensor_model_parallel_group,
    get_tensor_model_parallel_world_size,
)
from megatron.core.tensor_parallel.mappings import (
    copy_to_tensor_model_parallel_region,
    gather_from_tensor_model_parallel_region,
)
from megatron.core.tensor_parallel.layers import (
    linear_with_grad_accumulation_and_async_allreduce,
    linear_with_frozen_weight,
)


class ColumnParallelLinear(torch.nn.Module):
    def __init__(self, input_size, output_size, *, config, bias=True, gather_output=False,
                 skip_bias_add=False, is_expert=False):
        super().__init__()
        self.config = config
        self.gather_output = gather_output
        self.skip_bias_add = skip_bias_add
        self.is_expert = is_expert
        world_size = get_tensor_model_parallel_world_size()
        self.output_size_per_partition = output_size // world_size
        self.weight = torch.nn.Parameter(torch.empty(self.output_size_per_partition, input_size))
        self.bias = torch.nn.Parameter(torch.zeros(self.output_size_per_partition)) if bias else None
        self.sequence_parallel = config.sequence_parallel
        self.explicit_expert_comm = is_expert and config.tensor_model_parallel_size > 1
        self.allreduce_dgrad = world_size > 1 and not self.sequence_parallel
        self.tp_comm_overlap_ag = config.tp_comm_overlap and config.tp_comm_overlap_ag

    def _forward_impl(self, input, weight, bias, allreduce_dgrad, overlap_ag):
        if not weight.requires_grad:
            return linear_with_frozen_weight(
                input, weight, bias, gradient_accumulation_fusion=False,
                allreduce_dgrad=allreduce_dgrad,
                sequence_parallel=self.sequence_parallel,
            )
        return linear_with_grad_accumulation_and_async_allreduce(
            input=input,
            weight=weight,
            bias=bias,
            gradient_accumulation_fusion=self.config.gradient_accumulation_fusion,
            allreduce_dgrad=allreduce_dgrad,
            sequence_parallel=self.sequence_parallel,
            tp_comm_overlap_ag=overlap_ag,
            grad_output_buffer=None,
        )

    def forward(self, input_: torch.Tensor, weight: Optional[torch.Tensor] = None):
        if weight is None:
            weight = self.weight
        bias = self.bias if not self.skip_bias_add else None
        grad_enabled = torch.is_grad_enabled()

        if self.allreduce_dgrad or self.sequence_parallel or self.explicit_expert_comm:
            input_parallel = input_
        else:
            input_parallel = copy_to_tensor_model_parallel_region(input_)

        allreduce_dgrad = (
            False if self.explicit_expert_comm else self.allreduce_dgrad and grad_enabled
        )
        output_parallel = self._forward_impl(
            input_parallel,
            weight,
            bias,
            allreduce_dgrad,
            overlap_ag=self.tp_comm_overlap_ag if grad_enabled else False,
        )
        if self.gather_output:
            output = gather_from_tensor_model_parallel_region(output_parallel)
        else:
            output = output_parallel
        output_bias = self.bias if self.skip_bias_add else None
        return output, output_bias
