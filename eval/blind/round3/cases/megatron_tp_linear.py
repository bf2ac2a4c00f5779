# Modelled on megatron/core/tensor_parallel/layers.py (Megatron-LM core_r0.8-0.10).
from typing import Optional

import torch
from torch.nn.parameter import Parameter

from megatron.core.parallel_state import get_tensor_model_parallel_world_size
from megatron.core.tensor_parallel.mappings import (
    copy_to_tensor_model_parallel_region,
    gather_from_tensor_model_parallel_region,
    reduce_from_tensor_model_parallel_region,
    reduce_scatter_to_sequence_parallel_region,
    scatter_to_tensor_model_parallel_region,
)
from megatron.core.tensor_parallel.layers import linear_with_grad_accumulation_and_async_allreduce


class ColumnParallelLinear(torch.nn.Module):
    def __init__(self, input_size, output_size, *, config, gather_output=False, skip_bias_add=False,
                 disable_grad_reduce=False, is_expert=False):
        super().__init__()
        self.config = config
        self.gather_output = gather_output
        self.skip_bias_add = skip_bias_add
        self.disable_grad_reduce = disable_grad_reduce
        self.sequence_parallel = config.sequence_parallel
        self.explicit_expert_comm = is_expert and config.tensor_model_parallel_size > 1
        self.gradient_accumulation_fusion = config.gradient_accumulation_fusion
        world_size = get_tensor_model_parallel_world_size()
        self.output_size_per_partition = output_size // world_size
        self.weight = Parameter(torch.empty(self.output_size_per_partition, input_size))
        self.bias = Parameter(torch.empty(self.output_size_per_partition))
        self.allreduce_dgrad = world_size > 1 and not self.sequence_parallel and not self.disable_grad_reduce
        self._forward_impl = linear_with_grad_accumulation_and_async_allreduce

    def forward(self, input_: torch.Tensor, weight: Optional[torch.Tensor] = None):
        if weight is None:
            weight = self.weight
        bias = self.bias if not self.skip_bias_add else None

        grad_on = torch.is_grad_enabled()
        if (
            self.allreduce_dgrad
            or self.sequence_parallel
            or self.explicit_expert_comm
            or self.disable_grad_reduce
            or not grad_on
        ):
            input_parallel = input_
        else:
            input_parallel = copy_to_tensor_model_parallel_region(input_)

        output_parallel = self._forward_impl(
            input=input_parallel,
            weight=weight,
            bias=bias,
            gradient_accumulation_fusion=self.gradient_accumulation_fusion and grad_on,
            allreduce_dgrad=False if self.explicit_expert_comm else self.allreduce_dgrad,
            sequence_parallel=False if self.explicit_expert_comm else self.sequence_parallel,
        )
        if self.gather_output:
            assert not self.sequence_parallel
            output = gather_from_tensor_model_parallel_region(output_parallel)
        else:
            output = output_parallel
        output_bias = self.bias if self.skip_bias_add else None
        return output, output_bias


class RowParallelLinear(torch.nn.Module):
    def __init__(self, input_size, output_size, *, config, input_is_parallel=True, skip_bias_add=False,
                 is_expert=False):
        super().__init__()
        self.config = config
        self.input_is_parallel = input_is_parallel
        self.skip_bias_add = skip_bias_add
        self.sequence_parallel = config.sequence_parallel
        self.explicit_expert_comm = is_expert and config.tensor_model_parallel_size > 1
        world_size = get_tensor_model_parallel_world_size()
        self.weight = Parameter(torch.empty(output_size, input_size // world_size))
        self.bias = Parameter(torch.empty(output_size))
        self._forward_impl = linear_with_grad_accumulation_and_async_allreduce

    def forward(self, input_):
        if self.input_is_parallel:
            input_parallel = input_
        else:
            assert not self.sequence_parallel
            input_parallel = scatter_to_tensor_model_parallel_region(input_)
        output_parallel = self._forward_impl(
            input=input_parallel,
            weight=self.weight,
            bias=None,
            gradient_accumulation_fusion=self.config.gradient_accumulation_fusion,
            allreduce_dgrad=False,
            sequence_parallel=False,
        )
        if self.explicit_expert_comm:
            output_ = output_parallel
        elif self.sequence_parallel and torch.is_grad_enabled():
            output_ = reduce_scatter_to_sequence_parallel_region(output_parallel)
        else:
            output_ = reduce_from_tensor_model_parallel_region(output_parallel)
        if not self.skip_bias_add:
            output = (output_ + self.bias) if self.bias is not None else output_
            output_bias = None
        else:
            output = output_
            output_bias = self.bias
        return output, output_bias
