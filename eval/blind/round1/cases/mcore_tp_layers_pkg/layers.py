"""Column/Row parallel linear layers (cf. megatron/core/tensor_parallel/layers.py)."""
import torch

from .mappings import (
    gather_along_first_dim,
    pipelined_all_gather_matmul,
    reduce_from_tensor_model_parallel_region,
)
from .utils import autograd_recording


class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
    """See linear_with_grad_accumulation_and_async_allreduce"""

    @staticmethod
    def forward(ctx, input, weight, bias, gradient_accumulation_fusion, allreduce_dgrad, sequence_parallel,
                tp_comm_overlap_ag, tp_group, grad_recording):
        ctx.save_for_backward(input, weight)
        ctx.use_bias = bias is not None
        ctx.gradient_accumulation_fusion = gradient_accumulation_fusion
        ctx.allreduce_dgrad = allreduce_dgrad
        ctx.sequence_parallel = sequence_parallel
        ctx.tp_group = tp_group

        if sequence_parallel and tp_comm_overlap_ag and grad_recording:
            output = pipelined_all_gather_matmul(input, weight, tp_group)
        else:
            if sequence_parallel:
                total_input = gather_along_first_dim(input, tp_group, use_global_buffer=grad_recording)
            else:
                total_input = input
            output = torch.matmul(total_input, weight.t())
        if bias is not None:
            output = output + bias
        return output


def linear_with_grad_accumulation_and_async_allreduce(input, weight, bias, gradient_accumulation_fusion,
                                                      allreduce_dgrad, sequence_parallel, tp_comm_overlap_ag,
                                                      tp_group, grad_recording):
    args = [input, weight, bias, gradient_accumulation_fusion, allreduce_dgrad, sequence_parallel,
            tp_comm_overlap_ag, tp_group, grad_recording]
    return LinearWithGradAccumulationAndAsyncCommunication.apply(*args)


class ColumnParallelLinear(torch.nn.Module):

    def forward(self, input_: torch.Tensor):
        grad_recording = autograd_recording()
        bias = self.bias if not self.skip_bias_add else None
        output_parallel = linear_with_grad_accumulation_and_async_allreduce(
            input_,
            self.weight,
            bias,
            self.gradient_accumulation_fusion,
            self.allreduce_dgrad,
            self.sequence_parallel,
            self.config.tp_comm_overlap_ag,
            self.tp_group,
            grad_recording,
        )
        output_bias = self.bias if self.skip_bias_add else None
        return output_parallel, output_bias


class RowParallelLinear(torch.nn.Module):

    def forward(self, input_: torch.Tensor):
        output_parallel = linear_with_grad_accumulation_and_async_allreduce(
            input_, self.weight, None, self.gradient_accumulation_fusion, False, False, False, None,
            autograd_recording(),
        )
        output_ = reduce_from_tensor_model_parallel_region(output_parallel, self.tp_group,
                                                           grad_recording=autograd_recording())
        if not self.skip_bias_add:
            output = (output_ + self.bias) if self.bias is not None else output_
            output_bias = None
        else:
            output = output_
            output_bias = self.bias
        return output, output_bias
