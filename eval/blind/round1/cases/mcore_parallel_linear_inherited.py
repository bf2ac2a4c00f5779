# Copyright (c) 2024, NVIDIA CORPORATION. All rights reserved.
"""Tensor-parallel linear layers sharing a base class (modelled on megatron/core/tensor_parallel/layers.py)."""
import torch

from megatron.core.tensor_parallel.layers import (
    linear_with_frozen_weight,
    linear_with_grad_accumulation_and_async_allreduce,
)
from megatron.core.tensor_parallel.mappings import (
    reduce_from_tensor_model_parallel_region,
    reduce_scatter_to_sequence_parallel_region_async,
)


class _ParallelLinearBase(torch.nn.Module):
    """Shared helpers for Column/Row parallel linear layers."""

    def _autograd_active(self) -> bool:
        return torch.is_grad_enabled()

    def _select_forward_impl(self, weight):
        if self._autograd_active() and weight.requires_grad:
            return linear_with_grad_accumulation_and_async_allreduce
        return linear_with_frozen_weight


class ColumnParallelLinear(_ParallelLinearBase):

    def forward(self, input_: torch.Tensor):
        bias = self.bias if not self.skip_bias_add else None
        self._forward_impl = self._select_forward_impl(self.weight)
        output_parallel = self._forward_impl(
            input=input_,
            weight=self.weight,
            bias=bias,
            gradient_accumulation_fusion=self.gradient_accumulation_fusion,
            allreduce_dgrad=self.allreduce_dgrad,
            sequence_parallel=self.sequence_parallel,
            grad_output_buffer=None,
            tp_group=self.tp_group,
        )
        output_bias = self.bias if self.skip_bias_add else None
        return output_parallel, output_bias


class RowParallelLinear(_ParallelLinearBase):

    def forward(self, input_: torch.Tensor):
        self._forward_impl = self._select_forward_impl(self.weight)
        output_parallel = self._forward_impl(
            input=input_,
            weight=self.weight,
            bias=None,
            gradient_accumulation_fusion=self.gradient_accumulation_fusion,
            allreduce_dgrad=False,
            sequence_parallel=False,
            grad_output_buffer=None,
            tp_group=None,
        )

        if self.sequence_parallel:
            async_rs = self.config.tp_comm_overlap_rs and self._autograd_active()
            output_, handle = reduce_scatter_to_sequence_parallel_region_async(
                output_parallel, group=self.tp_group, async_op=async_rs
            )
            if self.bias is not None and not self.skip_bias_add:
                bias = self.bias
            else:
                bias = None
            if handle is not None:
                handle.wait()
        else:
            output_ = reduce_from_tensor_model_parallel_region(output_parallel, group=self.tp_group)
            bias = self.bias if not self.skip_bias_add else None

        output = (output_ + bias) if bias is not None else output_
        output_bias = self.bias if self.skip_bias_add else None
        return output, output_bias
