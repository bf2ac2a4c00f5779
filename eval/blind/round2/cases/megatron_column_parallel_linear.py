# Modelled on Megatron-LM megatron/core/tensor_parallel/layers.py (ColumnParallelLinear,
# LinearWithGradAccumulationAndAsyncCommunication)
from typing import Optional

import torch

from megatron.core.parallel_state import get_global_memory_buffer
from megatron.core.tensor_parallel.mappings import (
    copy_to_tensor_model_parallel_region,
    gather_from_tensor_model_parallel_region,
)
from megatron.core.utils import custom_bwd, custom_fwd

dist_all_gather_func = torch.distributed.all_gather_into_tensor


class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
    @staticmethod
    @custom_fwd
    def forward(ctx, input, weight, bias, gradient_accumulation_fusion, allreduce_dgrad, sequence_parallel,
                grad_output_buffer, wgrad_deferral_limit, tp_group, ag_num_chunks, reuse_gather_buffer):
        ctx.save_for_backward(input, weight)
        ctx.use_bias = bias is not None
        ctx.gradient_accumulation_fusion = gradient_accumulation_fusion
        ctx.allreduce_dgrad = allreduce_dgrad
        ctx.sequence_parallel = sequence_parallel
        ctx.grad_output_buffer = grad_output_buffer
        ctx.tp_group = tp_group

        if not sequence_parallel:
            output = torch.matmul(input, weight.t())
        else:
            dim_size = list(input.size())
            dim_size[0] = dim_size[0] * tp_group.size()
            if reuse_gather_buffer:
                total_input = get_global_memory_buffer().get_tensor(dim_size, input.dtype, "mpu")
            else:
                total_input = torch.empty(dim_size, dtype=input.dtype, device=input.device)
            if ag_num_chunks > 1:
                # pipelined: all-gather chunk i+1 while multiplying chunk i
                in_chunks = input.chunk(ag_num_chunks, dim=0)
                gathered = [torch.empty_like(total_input[: c.size(0) * tp_group.size()]) for c in in_chunks]
                handles = [dist_all_gather_func(g, c.contiguous(), group=tp_group, async_op=True)
                           for g, c in zip(gathered, in_chunks)]
                outs = []
                for handle, g in zip(handles, gathered):
                    handle.wait()
                    outs.append(torch.matmul(g.view(tp_group.size(), -1, *g.shape[1:]), weight.t()))
                output = torch.cat(outs, dim=1).flatten(0, 1)
            else:
                dist_all_gather_func(total_input, input, group=tp_group)
                output = torch.matmul(total_input, weight.t())
        if bias is not None:
            output = output + bias
        return output

    @staticmethod
    @custom_bwd
    def backward(ctx, grad_output):
        raise NotImplementedError


def linear_with_grad_accumulation_and_async_allreduce(input, weight, bias, gradient_accumulation_fusion,
                                                      allreduce_dgrad, sequence_parallel, grad_output_buffer=None,
                                                      wgrad_deferral_limit=None, tp_group=None, ag_num_chunks=1):
    reuse_gather_buffer = not torch.is_grad_enabled()
    args = [input, weight, bias, gradient_accumulation_fusion, allreduce_dgrad, sequence_parallel,
            grad_output_buffer, wgrad_deferral_limit, tp_group, ag_num_chunks, reuse_gather_buffer]
    return LinearWithGradAccumulationAndAsyncCommunication.apply(*args)


class ColumnParallelLinear(torch.nn.Module):
    @property
    def _ag_num_chunks(self) -> int:
        if not self.sequence_parallel:
            return 1
        return self.config.tp_comm_split_ag if torch.is_grad_enabled() else 1

    def forward(self, input_: torch.Tensor, weight: Optional[torch.Tensor] = None,
                runtime_gather_output: Optional[bool] = None):
        weight = self.weight if weight is None else weight
        bias = self.bias if not self.skip_bias_add else None

        if self.allreduce_dgrad or self.sequence_parallel or self.explicit_expert_comm:
            input_parallel = input_
        elif not torch.is_grad_enabled():
            input_parallel = input_
        else:
            input_parallel = copy_to_tensor_model_parallel_region(input_, group=self.tp_group)

        if self.config.defer_embedding_wgrad_compute and torch.is_grad_enabled():
            if (self.config.wgrad_deferral_limit == 0
                    or len(self.embedding_activation_buffer) < self.config.wgrad_deferral_limit):
                self.embedding_activation_buffer.append(input_parallel)

        output_parallel = linear_with_grad_accumulation_and_async_allreduce(
            input=input_parallel,
            weight=weight,
            bias=bias,
            gradient_accumulation_fusion=self.gradient_accumulation_fusion,
            allreduce_dgrad=False if self.explicit_expert_comm else self.allreduce_dgrad,
            sequence_parallel=False if self.explicit_expert_comm else self.sequence_parallel,
            tp_group=self.tp_group,
            ag_num_chunks=self._ag_num_chunks,
        )

        gather_output = self.gather_output if runtime_gather_output is None else runtime_gather_output
        if gather_output:
            output = gather_from_tensor_model_parallel_region(output_parallel, group=self.tp_group)
        else:
            output = output_parallel
        output_bias = self.bias if self.skip_bias_add else None
        return output, output_bias
