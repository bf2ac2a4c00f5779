import torch

from megatron.core import parallel_state
from megatron.core.tensor_parallel.layers import linear_with_grad_accumulation_and_async_allreduce
from megatron.core.tensor_parallel.mappings import (
    copy_to_tensor_model_parallel_region,
    reduce_from_tensor_model_parallel_region,
    reduce_scatter_to_sequence_parallel_region,
)


class ColumnParallelLinear(torch.nn.Module):

    def __init__(self, input_size, output_size, config, bias=True, tp_group=None):
        super().__init__()
        self.config = config
        self.sequence_parallel = config.sequence_parallel
        self.gradient_accumulation_fusion = config.gradient_accumulation_fusion
        self.tp_group = tp_group or parallel_state.get_tensor_model_parallel_group()
        world_size = torch.distributed.get_world_size(self.tp_group)
        self.weight = torch.nn.Parameter(torch.empty(output_size // world_size, input_size))
        self.bias = torch.nn.Parameter(torch.empty(output_size // world_size)) if bias else None
        self.disable_grad_reduce = False
        self.world_size = world_size

    def forward(self, input_):
        allreduce_dgrad = (
            self.world_size > 1
            and not self.sequence_parallel
            and not self.disable_grad_reduce
            and torch.is_grad_enabled()
        )
        if allreduce_dgrad or self.sequence_parallel:
            input_parallel = input_
        else:
            input_parallel = copy_to_tensor_model_parallel_region(input_, group=self.tp_group)
        return linear_with_grad_accumulation_and_async_allreduce(
            input=input_parallel,
            weight=self.weight,
            bias=self.bias,
            gradient_accumulation_fusion=self.gradient_accumulation_fusion,
            allreduce_dgrad=allreduce_dgrad,
            sequence_parallel=self.sequence_parallel,
            grad_output_buffer=None,
            tp_group=self.tp_group,
        )


class RowParallelLinear(torch.nn.Module):

    def __init__(self, input_size, output_size, config, tp_group=None, inference_tp_group=None):
        super().__init__()
        self.config = config
        self.sequence_parallel = config.sequence_parallel
        self.tp_group = tp_group or parallel_state.get_tensor_model_parallel_group()
        self.inference_tp_group = inference_tp_group or self.tp_group
        world_size = torch.distributed.get_world_size(self.tp_group)
        self.weight = torch.nn.Parameter(torch.empty(output_size, input_size // world_size))

    def _reduce_group(self):
        return self.tp_group if torch.is_grad_enabled() else self.inference_tp_group

    def forward(self, input_):
        output_parallel = torch.matmul(input_, self.weight.t())
        group = self._reduce_group()
        if self.sequence_parallel:
            return reduce_scatter_to_sequence_parallel_region(output_parallel, group=group)
        return reduce_from_tensor_model_parallel_region(output_parallel, group=group)
