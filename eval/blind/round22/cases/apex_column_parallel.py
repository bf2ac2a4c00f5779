# adapted from NVIDIA/apex apex/transformer/tensor_parallel/layers.py
from typing import Optional

import torch
import torch.nn.functional as F

from apex._autocast_utils import _cast_if_autocast_enabled
from apex.transformer.parallel_state import get_tensor_model_parallel_group
from apex.transformer.parallel_state import get_tensor_model_parallel_world_size
from apex.transformer.tensor_parallel.mappings import copy_to_tensor_model_parallel_region


class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
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
    ):
        ctx.save_for_backward(input, weight)
        ctx.use_bias = bias is not None
        ctx.gradient_accumulation_fusion = gradient_accumulation_fusion
        ctx.async_grad_allreduce = async_grad_allreduce
        ctx.sequence_parallel_enabled = sequence_parallel_enabled
        if ctx.sequence_parallel_enabled:
            world_size = get_tensor_model_parallel_world_size()
            shape = list(input.shape)
            shape[0] *= world_size
            all_gather_buffer = torch.empty(
                shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False,
            )
            torch.distributed.all_gather(
                list(all_gather_buffer.chunk(world_size)),
                input,
                group=get_tensor_model_parallel_group(),
            )
            total_input = all_gather_buffer
        else:
            total_input = input
        output = torch.matmul(total_input, weight.t())
        if bias is not None:
            output = output + bias
        return output


def linear_with_grad_accumulation_and_async_allreduce(
    input, weight, bias, gradient_accumulation_fusion, async_grad_allreduce, sequence_parallel_enabled,
) -> torch.Tensor:
    args = _cast_if_autocast_enabled(
        input, weight, bias, gradient_accumulation_fusion, async_grad_allreduce, sequence_parallel_enabled,
        False,  # use_16bit_in_wgrad_accum_fusion
    )
    with torch.cuda.amp.autocast(enabled=False):
        return LinearWithGradAccumulationAndAsyncCommunication.apply(*args)


class ColumnParallelLinear(torch.nn.Module):
    def __init__(self, input_size, output_size, *, async_tensor_model_parallel_allreduce=True,
                 sequence_parallel_enabled=False, gradient_accumulation_fusion=False):
        super().__init__()
        self.async_tensor_model_parallel_allreduce = async_tensor_model_parallel_allreduce
        self.sequence_parallel_enabled = sequence_parallel_enabled
        self.gradient_accumulation_fusion = gradient_accumulation_fusion

    def forward(self, input_: torch.Tensor):
        bias = self.bias if not self.skip_bias_add else None
        # the async all-reduce only overlaps the dgrad all-reduce in backward
        async_grad_allreduce = self.async_tensor_model_parallel_allreduce and torch.is_grad_enabled()
        sequence_parallel = self.sequence_parallel_enabled and torch.is_grad_enabled()
        if async_grad_allreduce or sequence_parallel:
            input_parallel = input_
        else:
            input_parallel = copy_to_tensor_model_parallel_region(input_)
        output_parallel = linear_with_grad_accumulation_and_async_allreduce(
            input_parallel, self.weight, bias, self.gradient_accumulation_fusion,
            async_grad_allreduce, sequence_parallel,
        )
        return output_parallel
