# adapted from NVIDIA/apex apex/transformer/tensor_parallel/layers.py
from typing import Optional, Tuple

import torch

from apex.transformer.parallel_state import get_tensor_model_parallel_group, get_tensor_model_parallel_world_size
from apex.transformer.tensor_parallel.mappings import copy_to_tensor_model_parallel_region
from apex.transformer.tensor_parallel.mappings import gather_from_tensor_model_parallel_region
from apex.transformer.utils import _cast_if_autocast_enabled


class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, gradient_accumulation_fusion, async_grad_allreduce,
                sequence_parallel_enabled, use_16bit_in_wgrad_accum_fusion=False):
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
            all_gather_buffer = torch.empty(shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
            torch.distributed.all_gather(list(all_gather_buffer.chunk(world_size)), input, group=get_tensor_model_parallel_group())
            total_input = all_gather_buffer
        else:
            total_input = input
        output = torch.matmul(total_input, weight.t())
        if bias is not None:
            output = output + bias
        return output


def linear_with_grad_accumulation_and_async_allreduce(input, weight, bias, gradient_accumulation_fusion,
                                                      async_grad_allreduce, sequence_parallel_enabled):
    args = _cast_if_autocast_enabled(input, weight, bias, gradient_accumulation_fusion,
                                     async_grad_allreduce, sequence_parallel_enabled, False)
    with torch.cuda.amp.autocast(enabled=False):
        return LinearWithGradAccumulationAndAsyncCommunication.apply(*args)


class ColumnParallelLinear(torch.nn.Module):
    def forward(self, input_: torch.Tensor) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        bias = self.bias if not self.skip_bias_add else None
        impl_kwargs = dict(
            gradient_accumulation_fusion=self.gradient_accumulation_fusion,
            async_grad_allreduce=self.async_tensor_model_parallel_allreduce and torch.is_grad_enabled(),
            sequence_parallel_enabled=self.sequence_parallel_enabled and torch.is_grad_enabled(),
        )
        if impl_kwargs["async_grad_allreduce"] or impl_kwargs["sequence_parallel_enabled"]:
            input_parallel = input_
        else:
            input_parallel = copy_to_tensor_model_parallel_region(input_)
        output_parallel = self._forward_impl(input=input_parallel, weight=self.weight, bias=bias, **impl_kwargs)
        if self.gather_output:
            output = gather_from_tensor_model_parallel_region(output_parallel)
        else:
            output = output_parallel
        output_bias = self.bias if self.skip_bias_add else None
        return output, output_bias
