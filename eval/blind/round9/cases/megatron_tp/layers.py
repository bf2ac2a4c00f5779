from typing import Optional

import torch
import torch.distributed as dist
from torch.nn.parameter import Parameter

from .config import ModelParallelConfig, make_comm_state
from .mappings import (
    _gather_along_first_dim,
    copy_to_tensor_model_parallel_region,
    gather_from_sequence_parallel_region,
    reduce_scatter_to_sequence_parallel_region,
)


class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, gradient_accumulation_fusion, allreduce_dgrad,
                sequence_parallel, overlap_ag, tp_group):
        ctx.save_for_backward(input, weight)
        ctx.use_bias = bias is not None
        ctx.gradient_accumulation_fusion = gradient_accumulation_fusion
        ctx.allreduce_dgrad = allreduce_dgrad
        ctx.sequence_parallel = sequence_parallel
        ctx.tp_group = tp_group
        if overlap_ag:
            total_input, handle = _gather_along_first_dim(input, tp_group, async_op=True)
            handle.wait()
        else:
            total_input = input
        output = torch.matmul(total_input, weight.t())
        if bias is not None:
            output = output + bias
        return output


class ColumnParallelLinear(torch.nn.Module):
    def __init__(self, input_size: int, output_size: int, *, config: ModelParallelConfig,
                 bias: bool = True, gather_output: bool = False, tp_group=None):
        super().__init__()
        self.config = config
        self.tp_group = tp_group
        world_size = config.tensor_model_parallel_size
        self.output_size_per_partition = output_size // world_size
        self.weight = Parameter(torch.empty(self.output_size_per_partition, input_size, dtype=config.params_dtype))
        self.bias = Parameter(torch.zeros(self.output_size_per_partition, dtype=config.params_dtype)) if bias else None
        self.gather_output = gather_output
        self.sequence_parallel = config.sequence_parallel
        self.allreduce_dgrad = world_size > 1 and not self.sequence_parallel
        self.gradient_accumulation_fusion = config.gradient_accumulation_fusion

    def forward(self, input_: torch.Tensor):
        state = make_comm_state(self.config, self.tp_group)
        allreduce_dgrad = self.allreduce_dgrad and state.grad_enabled
        overlap_ag = False
        if self.config.tp_comm_overlap and self.config.tp_comm_overlap_ag and state.grad_enabled:
            input_parallel = input_
            overlap_ag = state.sequence_parallel
        elif state.sequence_parallel:
            input_parallel = gather_from_sequence_parallel_region(input_, self.tp_group)
        elif allreduce_dgrad:
            input_parallel = input_
        else:
            input_parallel = copy_to_tensor_model_parallel_region(input_, self.tp_group)

        output_parallel = LinearWithGradAccumulationAndAsyncCommunication.apply(
            input_parallel,
            self.weight,
            self.bias,
            self.gradient_accumulation_fusion and state.grad_enabled,
            allreduce_dgrad,
            state.sequence_parallel,
            overlap_ag,
            self.tp_group,
        )
        if self.gather_output:
            world = [torch.empty_like(output_parallel) for _ in range(state.world_size)]
            dist.all_gather(world, output_parallel, group=self.tp_group)
            return torch.cat(world, dim=-1)
        return output_parallel


class RowParallelLinear(torch.nn.Module):
    def __init__(self, input_size: int, output_size: int, *, config: ModelParallelConfig,
                 bias: bool = True, tp_group=None):
        super().__init__()
        self.config = config
        self.tp_group = tp_group
        world_size = config.tensor_model_parallel_size
        self.weight = Parameter(torch.empty(output_size, input_size // world_size, dtype=config.params_dtype))
        self.bias = Parameter(torch.zeros(output_size, dtype=config.params_dtype)) if bias else None
        self.sequence_parallel = config.sequence_parallel

    def forward(self, input_: torch.Tensor) -> torch.Tensor:
        state = make_comm_state(self.config, self.tp_group)
        output_parallel = torch.matmul(input_, self.weight.t())
        if self.sequence_parallel:
            num_chunks = self.config.tp_comm_overlap_rs_num_chunks if state.grad_enabled else 1
            output_ = reduce_scatter_to_sequence_parallel_region(output_parallel, self.tp_group, num_chunks)
        else:
            dist.all_reduce(output_parallel, group=self.tp_group)
            output_ = output_parallel
        if self.bias is not None:
            output_ = output_ + self.bias
        return output_
