# adapted from NVIDIA/apex apex/transformer/tensor_parallel/layers.py
from typing import Optional

import torch

from apex.transformer.parallel_state import get_tensor_model_parallel_group
from apex.transformer.parallel_state import get_tensor_model_parallel_world_size


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


class LinearImpl:
    """Forward implementation picked once per call by ``make_linear_impl``."""

    def __init__(self, use_16bit_in_wgrad_accum_fusion: bool, grad_enabled: bool):
        self.use_16bit_in_wgrad_accum_fusion = use_16bit_in_wgrad_accum_fusion
        self.grad_enabled = grad_enabled

    def sequence_parallel(self, requested: bool) -> bool:
        return requested and self.grad_enabled

    def wgrad_fusion(self, requested: bool) -> bool:
        # fused wgrad accumulation only touches weight.main_grad in backward
        return self.grad_enabled and requested

    def __call__(self, input, weight, bias: Optional[torch.Tensor], gradient_accumulation_fusion,
                 async_grad_allreduce, sequence_parallel_enabled):
        with torch.cuda.amp.autocast(enabled=False):
            return LinearWithGradAccumulationAndAsyncCommunication.apply(
                input,
                weight,
                bias,
                self.wgrad_fusion(gradient_accumulation_fusion),
                async_grad_allreduce,
                self.sequence_parallel(sequence_parallel_enabled),
                self.use_16bit_in_wgrad_accum_fusion,
            )
