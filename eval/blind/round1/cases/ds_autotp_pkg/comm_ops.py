# Copyright (c) Microsoft Corporation.
# SPDX-License-Identifier: Apache-2.0
"""Autograd functions used by AutoTP layers."""
from typing import Any, Tuple

import torch
from deepspeed import comm as dist
from deepspeed.utils import groups as pg_utils


class RowParallel(torch.autograd.Function):
    """
    A custom autograd function for performing row-wise parallelism.
    """

    @staticmethod
    def symbolic(graph, input):
        """Symbolic function for tracing."""
        return input

    @staticmethod
    def forward(ctx: Any, group: dist.ProcessGroup, input: torch.Tensor, is_grad_enabled: bool) -> torch.Tensor:
        """
        Forward pass.
        """
        ctx.group = group
        if not pg_utils.is_parallel(group):
            return input
        if not is_grad_enabled:
            dist.inference_all_reduce(input, group=group)
        else:
            input = input.contiguous()
            dist.all_reduce(input, group=group)
        return input

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> Tuple[None, torch.Tensor, None]:
        """
        Backward pass.
        """
        return None, grad_output, None


class ColumnParallel(torch.autograd.Function):
    """
    Custom autograd function for column-wise parallelism.
    """

    @staticmethod
    def forward(ctx, group, input):
        ctx.group = group
        return input

    @staticmethod
    def backward(ctx, grad_output):
        if not pg_utils.is_parallel(ctx.group):
            return None, grad_output
        dist.all_reduce(grad_output.contiguous(), group=ctx.group)
        return None, grad_output
