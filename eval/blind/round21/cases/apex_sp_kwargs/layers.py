# adapted from NVIDIA/apex apex/transformer/tensor_parallel/layers.py
from typing import Optional, Tuple

import torch

from apex.transformer.parallel_state import get_tensor_model_parallel_group, get_tensor_model_parallel_world_size
from apex.transformer.tensor_parallel.mappings import reduce_from_tensor_model_parallel_region
from apex.transformer.utils import _cast_if_autocast_enabled

from ._kwargs import comm_kwargs


class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, gradient_accumulation_fusion, async_grad_allreduce,
                sequence_parallel_enabled, overlap_gather):
        ctx.save_for_backward(input, weight)
        ctx.use_bias = bias is not None
        ctx.gradient_accumulation_fusion = gradient_accumulation_fusion
        ctx.async_grad_allreduce = async_grad_allreduce
        ctx.sequence_parallel_enabled = sequence_parallel_enabled
        if ctx.sequence_parallel_enabled:
            world_size = get_tensor_model_parallel_world_size()
            shape = list(input.shape)
            shape[0] *= world_size
            all_gather_buffer = torch.empty(shape, dtype=input.dtype, device=torch.cuda.current_device(), requires_grad=False)
            if overlap_gather:
                handle = torch.distributed.all_gather(
                    list(all_gather_buffer.chunk(world_size)), input,
                    group=get_tensor_model_parallel_group(), async_op=True,
                )
                # Delay the start of the matmul shortly (3us) to have gather scheduled first
                _ = torch.empty(1, device=input.device) + 1
                handle.wait()
            else:
                torch.distributed.all_gather(
                    list(all_gather_buffer.chunk(world_size)), input, group=get_tensor_model_parallel_group()
                )
            total_input = all_gather_buffer
        else:
            total_input = input
        output = torch.matmul(total_input, weight.t())
        if bias is not None:
            output = output + bias
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        grad_input = grad_output.matmul(weight)
        if ctx.async_grad_allreduce:
            handle = torch.distributed.all_reduce(grad_input, group=get_tensor_model_parallel_group(), async_op=True)
            _ = torch.empty(1, device=grad_output.device) + 1
        grad_weight = grad_output.flatten(0, -2).t().matmul(input.flatten(0, -2))
        grad_bias = grad_output.sum(dim=0) if ctx.use_bias else None
        if ctx.async_grad_allreduce:  # wait for the overlapped all-reduce
            handle.wait()
        return grad_input, grad_weight, grad_bias, None, None, None, None


def linear_with_grad_accumulation_and_async_allreduce(input, weight, bias, gradient_accumulation_fusion,
                                                      async_grad_allreduce, sequence_parallel_enabled,
                                                      overlap_gather=False):
    args = _cast_if_autocast_enabled(input, weight, bias, gradient_accumulation_fusion,
                                     async_grad_allreduce, sequence_parallel_enabled, overlap_gather)
    with torch.cuda.amp.autocast(enabled=False):
        return LinearWithGradAccumulationAndAsyncCommunication.apply(*args)


class RowParallelLinear(torch.nn.Module):
    def forward(self, input_: torch.Tensor) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        output_parallel = linear_with_grad_accumulation_and_async_allreduce(
            input_, self.weight, None,
            sequence_parallel_enabled=self.sequence_parallel_enabled,
            **comm_kwargs(self),
        )
        output_ = reduce_from_tensor_model_parallel_region(output_parallel)
        output = output_ + self.bias if self.bias is not None else output_
        return output, None
