# adapted from NVIDIA/apex apex/transformer/tensor_parallel/layers.py
from typing import Optional, Tuple

import torch
from torch.nn.parameter import Parameter

from apex.transformer.parallel_state import get_tensor_model_parallel_world_size
from apex.transformer.tensor_parallel.mappings import copy_to_tensor_model_parallel_region
from apex.transformer.tensor_parallel.mappings import gather_from_tensor_model_parallel_region
from apex.transformer.utils import divide

from .factory import make_linear_impl


class ColumnParallelLinear(torch.nn.Module):

    def __init__(self, input_size, output_size, bias=True, gather_output=True, skip_bias_add=False, *,
                 no_async_tensor_model_parallel_allreduce=False, params_dtype=torch.float32,
                 gradient_accumulation_fusion=False, accumulation_in_fp16: bool = False,
                 sequence_parallel_enabled: bool = False):
        super().__init__()
        self.input_size = input_size
        self.output_size = output_size
        self.gather_output = gather_output
        world_size = get_tensor_model_parallel_world_size()
        self.output_size_per_partition = divide(output_size, world_size)
        self.skip_bias_add = skip_bias_add
        self.weight = Parameter(torch.empty(self.output_size_per_partition, self.input_size,
                                            device=torch.cuda.current_device(), dtype=params_dtype))
        self.bias = Parameter(torch.empty(self.output_size_per_partition, device=torch.cuda.current_device(),
                                          dtype=params_dtype)) if bias else None
        self.async_tensor_model_parallel_allreduce = (
            not no_async_tensor_model_parallel_allreduce and world_size > 1
        )
        self.sequence_parallel_enabled = sequence_parallel_enabled and world_size > 1
        self.gradient_accumulation_fusion = gradient_accumulation_fusion
        self.accumulation_in_fp16 = accumulation_in_fp16

    def forward(self, input_: torch.Tensor) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        bias = self.bias if not self.skip_bias_add else None
        impl = make_linear_impl(self.accumulation_in_fp16)

        if self.async_tensor_model_parallel_allreduce or self.sequence_parallel_enabled:
            input_parallel = input_
        else:
            input_parallel = copy_to_tensor_model_parallel_region(input_)

        output_parallel = impl(
            input_parallel,
            self.weight,
            bias,
            self.gradient_accumulation_fusion,
            self.async_tensor_model_parallel_allreduce,
            self.sequence_parallel_enabled,
        )
        if self.gather_output:
            assert not self.sequence_parallel_enabled
            output = gather_from_tensor_model_parallel_region(output_parallel)
        else:
            output = output_parallel
        output_bias = self.bias if self.skip_bias_add else None
        return output, output_bias
