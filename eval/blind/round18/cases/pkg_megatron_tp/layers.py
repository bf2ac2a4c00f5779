# adapted from NVIDIA/Megatron-LM megatron/core/tensor_parallel/layers.py
from typing import Callable, List, Optional

import torch
from torch.nn.parameter import Parameter

from megatron.core.model_parallel_config import ModelParallelConfig
from megatron.core.utils import divide, get_pg_size, get_tensor_model_parallel_group_if_none

from .linear_impl import linear_with_grad_accumulation_and_async_allreduce
from .mappings import reduce_from_tensor_model_parallel_region, set_tp_comm_overlap


class ColumnParallelLinear(torch.nn.Module):
    """Linear layer with column parallelism."""

    def __init__(self, input_size, output_size, *, config: ModelParallelConfig, init_method: Callable,
                 bias=True, gather_output=False, skip_bias_add=False, is_expert: bool = False,
                 disable_grad_reduce: bool = False, tp_group: Optional[torch.distributed.ProcessGroup] = None):
        super(ColumnParallelLinear, self).__init__()
        self.input_size = input_size
        self.output_size = output_size
        self.gather_output = gather_output
        self.skip_bias_add = skip_bias_add
        self.is_expert = is_expert
        self.config = config
        self.disable_grad_reduce = disable_grad_reduce
        self.tp_group = get_tensor_model_parallel_group_if_none(tp_group, is_expert=self.is_expert)
        world_size = get_pg_size(self.tp_group)
        self.output_size_per_partition = divide(output_size, world_size)
        self.weight = Parameter(torch.empty(self.output_size_per_partition, self.input_size,
                                            device=torch.cuda.current_device(), dtype=config.params_dtype))
        self.bias = Parameter(torch.empty(self.output_size_per_partition, device=torch.cuda.current_device(),
                                          dtype=config.params_dtype)) if bias else None
        self.sequence_parallel = config.sequence_parallel
        self.allreduce_dgrad = world_size > 1 and not self.sequence_parallel and not self.disable_grad_reduce
        self.gradient_accumulation_fusion = config.gradient_accumulation_fusion
        self._forward_impl = linear_with_grad_accumulation_and_async_allreduce

    def forward(self, input_: torch.Tensor, weight: Optional[torch.Tensor] = None):
        if weight is None:
            weight = self.weight
        bias = self.bias if not self.skip_bias_add else None

        forward_kwargs = {
            "input": input_,
            "weight": weight,
            "bias": bias,
            "gradient_accumulation_fusion": self.gradient_accumulation_fusion,
            "allreduce_dgrad": self.allreduce_dgrad,
            "sequence_parallel": self.sequence_parallel,
            "grad_output_buffer": None,
            "wgrad_deferral_limit": 0,
            "tp_group": self.tp_group,
            "grad_enabled": torch.is_grad_enabled(),
        }
        output_parallel = self._forward_impl(**forward_kwargs)
        output = output_parallel
        output_bias = self.bias if self.skip_bias_add else None
        return output, output_bias


class RowParallelLinear(torch.nn.Module):
    """Linear layer with row parallelism."""

    def __init__(self, input_size: int, output_size: int, *, config: ModelParallelConfig, init_method: Callable,
                 bias: bool, input_is_parallel: bool, skip_bias_add: bool,
                 tp_group: Optional[torch.distributed.ProcessGroup] = None):
        super(RowParallelLinear, self).__init__()
        self.input_size = input_size
        self.output_size = output_size
        self.input_is_parallel = input_is_parallel
        self.skip_bias_add = skip_bias_add
        self.config = config
        self.tp_group = get_tensor_model_parallel_group_if_none(tp_group)
        world_size = get_pg_size(self.tp_group)
        self.input_size_per_partition = divide(input_size, world_size)
        self.weight = Parameter(torch.empty(self.output_size, self.input_size_per_partition,
                                            device=torch.cuda.current_device(), dtype=config.params_dtype))
        self.bias = Parameter(torch.empty(self.output_size, device=torch.cuda.current_device(),
                                          dtype=config.params_dtype)) if bias else None
        self.gradient_accumulation_fusion = config.gradient_accumulation_fusion
        self._forward_impl = linear_with_grad_accumulation_and_async_allreduce

    def forward(self, input_):
        input_parallel = input_
        output_parallel = self._forward_impl(
            input=input_parallel,
            weight=self.weight,
            bias=None,
            gradient_accumulation_fusion=self.gradient_accumulation_fusion,
            allreduce_dgrad=False,
            sequence_parallel=False,
            tp_group=None,
        )
        # overlap the TP all-reduce with the bias-dropout-add only for training steps
        set_tp_comm_overlap(torch.is_grad_enabled())
        output_ = reduce_from_tensor_model_parallel_region(output_parallel, group=self.tp_group)
        if not self.skip_bias_add:
            output = (output_ + self.bias) if self.bias is not None else output_
            output_bias = None
        else:
            output = output_
            output_bias = self.bias
        return output, output_bias
