# Copyright (c) Microsoft Corporation.
# SPDX-License-Identifier: Apache-2.0
"""AutoTP replaced linear layers (trimmed)."""
import torch
from torch import nn
from torch.nn import functional as F

from deepspeed.module_inject.layers import TensorParallel_Layer, add_bias

from .comm_ops import ColumnParallel, RowParallel


class LinearAllreduce(TensorParallel_Layer):

    def __init__(self, module, mp_group, **kwargs):
        super(LinearAllreduce, self).__init__(mp_group, **kwargs)
        self.weight = module.weight
        self.bias = module.bias
        self._tp_partition([self.weight, self.bias])
        self.support_training = True

    def forward(self, input):
        output = torch.matmul(input, self.weight.transpose(-1, -2))
        output = RowParallel.apply(self.mp_group, output, torch.is_grad_enabled())
        if self.bias is not None:
            output = add_bias(output, self.bias)
        return output


class LinearLayer(TensorParallel_Layer):

    def __init__(self, module, mp_group=None, skip_partition=False, **kwargs):
        super(LinearLayer, self).__init__(mp_group, **kwargs)
        self.weight = module.weight
        self.bias = module.bias
        if not skip_partition:
            self._tp_partition([self.weight, self.bias])
        self.support_training = True

    def forward(self, input):
        if getattr(self, "mp_group", None) is not None and torch.is_grad_enabled():
            input = ColumnParallel.apply(self.mp_group, input)
        output = torch.matmul(input, self.weight.transpose(-1, -2))
        if self.bias is not None:
            output = add_bias(output, self.bias)
        return output


class LmHeadLinearAllreduce(LinearAllreduce):

    def forward(self, input):
        input_shard_size = self.weight.shape[-1]
        input_shard_offset = self.tp_index * input_shard_size
        output = torch.matmul(input[:, :, input_shard_offset:input_shard_offset + input_shard_size],
                              self.weight.transpose(-1, -2))
        output = RowParallel.apply(self.mp_group, output, torch.is_grad_enabled())
        if self.bias is not None:
            output = add_bias(output, self.bias)
        return output
