# adapted from NVIDIA/apex apex/transformer/tensor_parallel/layers.py
from typing import Optional, Tuple

import torch
from torch.nn.parameter import Parameter

from apex.transformer.parallel_state import get_tensor_model_parallel_group, get_tensor_model_parallel_world_size
from apex.transformer.tensor_parallel.mappings import copy_to_tensor_model_parallel_region
from apex.transformer.utils import divide

from ._flags import resolve_linear_flags


class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, gradient_accumulation_fusion, async_grad_allreduce,
                sequence_parallel_enabled, overlap_all_gather):
        ctx.save_for_backward(input, weight)
        ctx.use_bias = bias is not None
        ctx.gradient_accumulation_fusion = gradient_accumulation_fusion
        ctx.async_grad_allreduce = async_grad_allreduce
        ctx.sequence_parallel_enabled = sequence_parallel_enabled

        if ctx.sequence_parallel_enabled:
            world_size = get_tensor_model_parallel_world_size()
            shape = list(input.shape)
            shape[0] *= world_size
            all_gather_buffer = torch.empty(shape, dtype=input.dtype, device=torch.cuda.current_device(),
                                            requires_grad=False)
            if ctx.sequence_parallel_enabled and overlap_all_gather:
                handle = torch.distributed.all_gather(
                    list(all_gather_buffer.chunk(world_size)), input,
                    group=get_tensor_model_parallel_group(), async_op=True,
                )
                # Delay the start of the GEMM shortly (3us) to have gather scheduled first
                _ = torch.empty(1, device=input.device) + 1
                handle.wait()
            else:
                torch.distributed.all_gather(
                    list(all_gather_buffer.chunk(world_size)), input, group=get_tensor_model_parallel_group(),
                )
            total_input = all_gather_buffer
        else:
            total_input = input
        output = torch.matmul(total_input, weight.t())
        if bias is not None:
            output = output + bias
        return output


def linear_with_grad_accumulation_and_async_allreduce(input, weight, bias, gradient_accumulation_fusion,
                                                      async_grad_allreduce, sequence_parallel_enabled,
                                                      overlap_all_gather=False):
    with torch.cuda.amp.autocast(enabled=False):
        return LinearWithGradAccumulationAndAsyncCommunication.apply(
            input, weight, bias, gradient_accumulation_fusion, async_grad_allreduce,
            sequence_parallel_enabled, overlap_all_gather)


class ColumnParallelLinear(torch.nn.Module):
    def __init__(self, input_size, output_size, bias=True, *, params_dtype=torch.float32,
                 gradient_accumulation_fusion=False, sequence_parallel_enabled: bool = False):
        super().__init__()
        world_size = get_tensor_model_parallel_world_size()
        self.output_size_per_partition = divide(output_size, world_size)
        self.weight = Parameter(torch.empty(self.output_size_per_partition, input_size,
                                            device=torch.cuda.current_device(), dtype=params_dtype))
        self.bias = Parameter(torch.zeros(self.output_size_per_partition, device=torch.cuda.current_device(),
                                          dtype=params_dtype)) if bias else None
        self.async_tensor_model_parallel_allreduce = world_size > 1 and not sequence_parallel_enabled
        self.sequence_parallel_enabled = sequence_parallel_enabled
        self.gradient_accumulation_fusion = gradient_accumulation_fusion
        self._forward_impl = linear_with_grad_accumulation_and_async_allreduce

    def forward(self, input_: torch.Tensor) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        if torch.is_grad_enabled() and self.gradient_accumulation_fusion:
            assert hasattr(self.weight, "main_grad"), "gradient_accumulation_fusion needs weight.main_grad"
        if self.async_tensor_model_parallel_allreduce or self.sequence_parallel_enabled:
            input_parallel = input_
        else:
            input_parallel = copy_to_tensor_model_parallel_region(input_)
        flags = resolve_linear_flags()
        output_parallel = self._forward_impl(
            input=input_parallel,
            weight=self.weight,
            bias=self.bias,
            gradient_accumulation_fusion=self.gradient_accumulation_fusion,
            async_grad_allreduce=self.async_tensor_model_parallel_allreduce,
            sequence_parallel_enabled=self.sequence_parallel_enabled,
            **flags,
        )
        return output_parallel, None
