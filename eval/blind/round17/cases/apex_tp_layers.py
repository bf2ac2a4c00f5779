# adapted from NVIDIA/apex apex/transformer/tensor_parallel/layers.py
from typing import Optional

import torch
import torch.nn.functional as F
from torch.nn.parameter import Parameter

from apex.transformer.parallel_state import get_tensor_model_parallel_group
from apex.transformer.parallel_state import get_tensor_model_parallel_world_size
from apex.transformer.tensor_parallel.mappings import (
    copy_to_tensor_model_parallel_region,
)
from apex.transformer.tensor_parallel.mappings import (
    gather_from_tensor_model_parallel_region,
)


class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
    """Linear layer execution with asynchronous communication and gradient accumulation fusion in backprop."""

    @staticmethod
    def forward(
        ctx,
        input: torch.Tensor,
        weight: torch.Tensor,
        bias: Optional[torch.Tensor],
        gradient_accumulation_fusion: bool,
        async_grad_allreduce: bool,
        sequence_parallel_enabled: bool,
        use_16bit_in_wgrad_accum_fusion: bool = False,
        overlap_all_gather: bool = False,
    ):
        ctx.save_for_backward(input, weight)
        ctx.use_bias = bias is not None
        ctx.gradient_accumulation_fusion = gradient_accumulation_fusion
        ctx.async_grad_allreduce = async_grad_allreduce
        ctx.sequence_parallel_enabled = sequence_parallel_enabled
        ctx.use_16bit_in_wgrad_accum_fusion = use_16bit_in_wgrad_accum_fusion

        if ctx.sequence_parallel_enabled:
            world_size = get_tensor_model_parallel_world_size()
            shape = list(input.shape)
            shape[0] *= world_size

            all_gather_buffer = torch.empty(
                shape,
                dtype=input.dtype,
                device=torch.cuda.current_device(),
                requires_grad=False,
            )
            handle = torch.distributed.all_gather(
                list(all_gather_buffer.chunk(world_size)),
                input,
                group=get_tensor_model_parallel_group(),
                async_op=overlap_all_gather,
            )
            if handle is not None:
                # Delay the start of the GEMM shortly to have the gather scheduled first
                _ = torch.empty(1, device=input.device) + 1
                handle.wait()
            total_input = all_gather_buffer
        else:
            total_input = input
        output = torch.matmul(total_input, weight.t())
        if bias is not None:
            output = output + bias
        return output


def linear_with_grad_accumulation_and_async_allreduce(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor],
    gradient_accumulation_fusion: bool,
    async_grad_allreduce: bool,
    sequence_parallel_enabled: bool,
) -> torch.Tensor:
    with torch.cuda.amp.autocast(enabled=False):
        return LinearWithGradAccumulationAndAsyncCommunication.apply(
            input,
            weight,
            bias,
            gradient_accumulation_fusion,
            async_grad_allreduce and torch.is_grad_enabled(),
            sequence_parallel_enabled,
            False,  # use_16bit_in_wgrad_accum_fusion
            torch.is_grad_enabled(),  # overlap_all_gather
        )


class ColumnParallelLinear(torch.nn.Module):
    """Linear layer with column parallelism."""

    def __init__(self, input_size, output_size, bias=True, gather_output=True, *,
                 no_async_tensor_model_parallel_allreduce=False,
                 gradient_accumulation_fusion=False,
                 sequence_parallel_enabled: bool = False):
        super().__init__()
        self.input_size = input_size
        self.output_size = output_size
        self.gather_output = gather_output
        self.async_tensor_model_parallel_allreduce = (
            not no_async_tensor_model_parallel_allreduce and get_tensor_model_parallel_world_size() > 1
        )
        self.gradient_accumulation_fusion = gradient_accumulation_fusion
        self.sequence_parallel_enabled = sequence_parallel_enabled
        self.weight = Parameter(torch.empty(output_size // get_tensor_model_parallel_world_size(), input_size))
        self.bias = Parameter(torch.empty(output_size // get_tensor_model_parallel_world_size())) if bias else None

    def forward(self, input_: torch.Tensor):
        bias = self.bias
        if self.async_tensor_model_parallel_allreduce or self.sequence_parallel_enabled:
            input_parallel = input_
        else:
            input_parallel = copy_to_tensor_model_parallel_region(input_)

        # Matrix multiply.
        output_parallel = linear_with_grad_accumulation_and_async_allreduce(
            input=input_parallel,
            weight=self.weight,
            bias=bias,
            gradient_accumulation_fusion=self.gradient_accumulation_fusion,
            async_grad_allreduce=self.async_tensor_model_parallel_allreduce,
            sequence_parallel_enabled=self.sequence_parallel_enabled,
        )
        if self.gather_output and torch.is_grad_enabled():
            # All-gather across the partitions.
            assert not self.sequence_parallel_enabled
            output = gather_from_tensor_model_parallel_region(output_parallel)
        else:
            output = output_parallel
        return output, None
