import torch
import torch.nn as nn

from megatron.core.parallel_state import get_tensor_model_parallel_world_size
from megatron.core.tensor_parallel.layers import linear_with_grad_accumulation_and_async_allreduce
from megatron.core.tensor_parallel.mappings import gather_from_tensor_model_parallel_region

from .mode import current_mode


class ColumnParallelLinear(nn.Module):
    def __init__(self, input_size, output_size, config, gather_output=False, bias=True):
        super().__init__()
        self.world_size = get_tensor_model_parallel_world_size()
        self.output_size_per_partition = output_size // self.world_size
        self.weight = nn.Parameter(torch.empty(self.output_size_per_partition, input_size))
        self.bias = nn.Parameter(torch.empty(self.output_size_per_partition)) if bias else None
        self.gather_output = gather_output
        self.sequence_parallel = config.sequence_parallel
        self.gradient_accumulation_fusion = config.gradient_accumulation_fusion

    def forward(self, input_, mode=None):
        mode = mode or current_mode()
        allreduce_dgrad = self.world_size > 1 and not self.sequence_parallel and mode["grad"]
        output_parallel = linear_with_grad_accumulation_and_async_allreduce(
            input=input_,
            weight=self.weight,
            bias=self.bias,
            gradient_accumulation_fusion=self.gradient_accumulation_fusion,
            allreduce_dgrad=allreduce_dgrad,
            sequence_parallel=self.sequence_parallel,
        )
        gather = self.gather_output or not mode["grad"]
        if gather and self.world_size > 1:
            output = gather_from_tensor_model_parallel_region(output_parallel)
        else:
            output = output_parallel
        return output, None
