# adapted from NVIDIA/Megatron-LM megatron/core/tensor_parallel/layers.py
from typing import Callable, List, Optional

import torch
from torch.nn.parameter import Parameter

from megatron.core.model_parallel_config import ModelParallelConfig
from megatron.core.utils import divide, get_pg_rank, get_pg_size, get_tensor_model_parallel_group_if_none

from .mappings import (
    _gather_along_first_dim,
    copy_to_tensor_model_parallel_region,
    gather_from_sequence_parallel_region,
    make_output_reducer,
)
from .utils import build_comm_plan


def linear_with_frozen_weight(input, weight, bias, *args, **kwargs):
    output = torch.matmul(input, weight.t())
    if bias is not None:
        output = output + bias
    return output


def linear_with_grad_accumulation_and_async_allreduce(input, weight, bias, *args, **kwargs):
    from .autograd import LinearWithGradAccumulationAndAsyncCommunication

    return LinearWithGradAccumulationAndAsyncCommunication.apply(input, weight, bias, *args)


class ColumnParallelLinear(torch.nn.Module):
    """Linear layer with column parallelism.

    The linear layer is defined as Y = XA + b. A is parallelized along
    its second dimension as A = [A_1, ..., A_p].
    """

    def __init__(
        self,
        input_size,
        output_size,
        *,
        config: ModelParallelConfig,
        init_method: Callable,
        bias=True,
        gather_output=False,
        skip_bias_add=False,
        embedding_activation_buffer: Optional[List[torch.Tensor]] = None,
        tp_group: Optional[torch.distributed.ProcessGroup] = None,
    ):
        super(ColumnParallelLinear, self).__init__()
        self.input_size = input_size
        self.output_size = output_size
        self.gather_output = gather_output
        self.skip_bias_add = skip_bias_add
        self.config = config
        self.embedding_activation_buffer = embedding_activation_buffer
        self.sequence_parallel = config.sequence_parallel
        self.gradient_accumulation_fusion = config.gradient_accumulation_fusion
        self.tp_group = get_tensor_model_parallel_group_if_none(tp_group)
        world_size = get_pg_size(self.tp_group)
        self.output_size_per_partition = divide(output_size, world_size)
        self.weight = Parameter(
            torch.empty(self.output_size_per_partition, self.input_size, device=torch.cuda.current_device(),
                        dtype=config.params_dtype)
        )
        if bias:
            self.bias = Parameter(
                torch.empty(self.output_size_per_partition, device=torch.cuda.current_device(), dtype=config.params_dtype)
            )
        else:
            self.register_parameter("bias", None)

    def _forward_impl(self, input, weight, *args, **kwargs):
        if not weight.requires_grad:
            return linear_with_frozen_weight(input, weight, *args, **kwargs)
        else:
            return linear_with_grad_accumulation_and_async_allreduce(input, weight, *args, **kwargs)

    def forward(self, input_: torch.Tensor, weight: Optional[torch.Tensor] = None, runtime_gather_output=None):
        if weight is None:
            weight = self.weight
        else:
            expected_shape = (self.output_size_per_partition, self.input_size)
            if weight.shape != expected_shape:
                raise RuntimeError(
                    f"supplied weight's shape is {tuple(weight.shape)}, not {expected_shape} as expected"
                )

        assert not (
            torch.is_grad_enabled()
            and self.config.defer_embedding_wgrad_compute
            and self.embedding_activation_buffer is None
        ), "defer_embedding_wgrad_compute requires an embedding_activation_buffer"

        bias = self.bias if not self.skip_bias_add else None
        plan = build_comm_plan(self.config, self.sequence_parallel)

        if plan.overlap_ag:
            # start the sequence-parallel all-gather early and overlap it with the bias prefetch
            total_input, handle = _gather_along_first_dim(
                input_, self.tp_group, use_global_buffer=plan.use_global_buffer, async_op=True
            )
            if bias is not None:
                bias = bias.contiguous()
            if handle is not None:
                handle.wait()
            sequence_parallel = False
        elif plan.sequence_parallel:
            total_input = input_
            sequence_parallel = True
        else:
            total_input = copy_to_tensor_model_parallel_region(input_, group=self.tp_group)
            sequence_parallel = False

        if self.config.defer_embedding_wgrad_compute and torch.is_grad_enabled():
            if (
                self.config.wgrad_deferral_limit == 0
                or len(self.embedding_activation_buffer) < self.config.wgrad_deferral_limit
            ):
                self.embedding_activation_buffer.append(total_input)

        output_parallel = self._forward_impl(
            input=total_input,
            weight=weight,
            bias=bias,
            gradient_accumulation_fusion=self.gradient_accumulation_fusion,
            allreduce_dgrad=False,
            sequence_parallel=sequence_parallel,
            tp_group=self.tp_group,
        )

        gather_output = self.gather_output
        if runtime_gather_output is not None:
            gather_output = runtime_gather_output
        if gather_output:
            output = gather_from_sequence_parallel_region(output_parallel, group=self.tp_group)
        else:
            output = output_parallel
        output_bias = self.bias if self.skip_bias_add else None
        return output, output_bias


class RowParallelLinear(torch.nn.Module):
    """Linear layer with row parallelism."""

    def __init__(
        self,
        input_size: int,
        output_size: int,
        *,
        config: ModelParallelConfig,
        init_method: Callable,
        bias: bool,
        input_is_parallel: bool,
        skip_bias_add: bool,
        tp_group: Optional[torch.distributed.ProcessGroup] = None,
    ):
        super(RowParallelLinear, self).__init__()
        self.input_size = input_size
        self.output_size = output_size
        self.input_is_parallel = input_is_parallel
        self.skip_bias_add = skip_bias_add
        self.config = config
        self.gradient_accumulation_fusion = config.gradient_accumulation_fusion
        self.sequence_parallel = config.sequence_parallel
        self.tp_group = get_tensor_model_parallel_group_if_none(tp_group)
        world_size = get_pg_size(self.tp_group)
        self.input_size_per_partition = divide(input_size, world_size)
        self.weight = Parameter(
            torch.empty(self.output_size, self.input_size_per_partition, device=torch.cuda.current_device(),
                        dtype=config.params_dtype)
        )
        if bias:
            self.bias = Parameter(torch.empty(self.output_size, device=torch.cuda.current_device(),
                                              dtype=config.params_dtype))
        else:
            self.register_parameter("bias", None)

    def forward(self, input_):
        assert self.input_is_parallel
        output_parallel = linear_with_grad_accumulation_and_async_allreduce(
            input_, self.weight, None, self.gradient_accumulation_fusion, False, False, None, 0, self.tp_group,
        )

        reducer = make_output_reducer(self.tp_group, self.config.tp_comm_overlap_rs)
        output_, handle = reducer(output_parallel)
        bias = self.bias.contiguous() if self.bias is not None else None
        if handle is not None:
            handle.wait()
        if not self.skip_bias_add:
            output = (output_ + bias) if bias is not None else output_
            output_bias = None
        else:
            output = output_
            output_bias = bias
        return output, output_bias
