# adapted from NVIDIA/Megatron-LM megatron/core/tensor_parallel/layers.py
from typing import Optional

import torch

from megatron.core.tensor_parallel.mappings import (
    copy_to_tensor_model_parallel_region,
    gather_from_tensor_model_parallel_region,
)
from megatron.core.tensor_parallel.layers import (
    linear_with_frozen_weight,
    linear_with_grad_accumulation_and_async_allreduce,
)


class ColumnParallelLinear(torch.nn.Module):
    def __init__(self, input_size, output_size, *, config, bias=True, gather_output=False,
                 skip_bias_add=False, is_expert=False, tp_group=None):
        super(ColumnParallelLinear, self).__init__()
        self.input_size = input_size
        self.output_size = output_size
        self.gather_output = gather_output
        self.skip_bias_add = skip_bias_add
        self.is_expert = is_expert
        self.config = config
        self.tp_group = tp_group
        self.sequence_parallel = config.sequence_parallel
        self.allreduce_dgrad = tp_group.size() > 1 and not self.sequence_parallel
        self.explicit_expert_comm = self.is_expert and tp_group.size() > 1
        self.disable_grad_reduce = False
        self.gradient_accumulation_fusion = config.gradient_accumulation_fusion
        self.weight = torch.nn.Parameter(torch.empty(output_size // tp_group.size(), input_size))
        self.bias = torch.nn.Parameter(torch.zeros(output_size // tp_group.size())) if bias else None

    def _forward_impl(self, input, weight, *args, **kwargs):
        if not weight.requires_grad:
            return linear_with_frozen_weight(input, weight, *args, **kwargs)
        else:
            return linear_with_grad_accumulation_and_async_allreduce(input, weight, *args, **kwargs)

    def forward(self, input_: torch.Tensor, weight: Optional[torch.Tensor] = None,
                runtime_gather_output: Optional[bool] = None):
        if weight is None:
            weight = self.weight
        bias = self.bias if not self.skip_bias_add else None

        if (
            self.allreduce_dgrad
            or self.sequence_parallel
            or self.explicit_expert_comm
            or self.disable_grad_reduce
            or not torch.is_grad_enabled()
        ):
            input_parallel = input_
        else:
            input_parallel = copy_to_tensor_model_parallel_region(input_, group=self.tp_group)

        allreduce_dgrad = False if self.explicit_expert_comm else self.allreduce_dgrad
        output_parallel = self._forward_impl(
            input=input_parallel,
            weight=weight,
            bias=bias,
            gradient_accumulation_fusion=self.gradient_accumulation_fusion,
            allreduce_dgrad=allreduce_dgrad,
            sequence_parallel=False if self.explicit_expert_comm else self.sequence_parallel,
            tp_group=self.tp_group,
        )

        gather_output = self.gather_output
        if runtime_gather_output is not None:
            gather_output = runtime_gather_output
        elif not torch.is_grad_enabled():
            gather_output = True

        if gather_output:
            output = gather_from_tensor_model_parallel_region(output_parallel, group=self.tp_group)
        else:
            output = output_parallel
        output_bias = self.bias if self.skip_bias_add else None
        return output, output_bias
