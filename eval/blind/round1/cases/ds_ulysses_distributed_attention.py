# Copyright (c) Microsoft Corporation.
# SPDX-License-Identifier: Apache-2.0

# DeepSpeed Team
"""Ulysses sequence-parallel attention, trimmed from deepspeed/sequence/layer.py."""
from typing import Any, Tuple

import torch
import deepspeed.comm as dist
from deepspeed.accelerator import get_accelerator
from torch import Tensor
from torch.nn import Module

from .layer_utils import post_all2all, pre_all2all_fun, _generate_layout_params

_grad_mode = torch.is_grad_enabled


def single_all_to_all(input, scatter_idx, gather_idx, batch_dim_idx, group, async_op=False, handle=None, type=None):
    seq_world_size = dist.get_world_size(group)
    pre_idx, pre_shape, post_idx, post_shape = _generate_layout_params(scatter_idx, batch_dim_idx, seq_world_size,
                                                                       input)
    input_t = pre_all2all_fun(pre_idx, pre_shape, input)
    post_all2all_fun = post_all2all(post_idx, post_shape)
    output = torch.empty_like(input_t)
    work = dist.all_to_all_single(output, input_t, group=group, async_op=async_op)
    if async_op:
        handle[type + '_work'] = work
        handle[type + '_grad'] = output
        handle[type + '_post_all2all_func'] = post_all2all_fun
        return output.view(post_shape)
    return post_all2all_fun(output)


class _SeqAllToAll(torch.autograd.Function):

    @staticmethod
    def forward(ctx: Any, group, input: Tensor, scatter_idx: int, gather_idx: int, batch_dim_idx: int,
                stream=None, handle=None, type=None, is_fwd=True) -> Tensor:
        ctx.group = group
        ctx.scatter_idx = scatter_idx
        ctx.gather_idx = gather_idx
        ctx.stream = stream
        ctx.handle = handle
        ctx.type = type
        ctx.batch_dim_idx = batch_dim_idx
        return single_all_to_all(input, scatter_idx, gather_idx, batch_dim_idx, group, False)

    @staticmethod
    def backward(ctx: Any, *grad_output: Tensor) -> Tuple[None, Tensor, None, None, None, None, None, None, None]:
        return (None, _SeqAllToAll.apply(ctx.group, *grad_output, ctx.gather_idx, ctx.scatter_idx, ctx.batch_dim_idx,
                                         ctx.stream, ctx.handle, ctx.type, False), None, None, None, None, None, None,
                None)


class DistributedAttention(Module):

    def __init__(self, local_attention, sequence_process_group, scatter_idx=2, gather_idx=0, sp_stream=None):
        super(DistributedAttention, self).__init__()
        self.local_attn = local_attention
        self.spg = sequence_process_group
        self.scatter_idx = scatter_idx
        self.gather_idx = gather_idx
        self.sp_overlap_comm = False
        self.overlap_handles = None
        self.sp_stream = sp_stream
        if sp_stream is not None:
            self.overlap_handles = {}
            self.sp_overlap_comm = True
            self.default_stream = get_accelerator().default_stream()

    def forward(self, query: Tensor, key: Tensor, value: Tensor, batch_dim_idx: int, *args: Any, **kwargs) -> Tensor:

        def bwd_hook(layer_type):

            def hook_fun(grad):
                type = 'd' + layer_type
                self.overlap_handles[type + '_work'].wait()
                self.sp_stream.wait_stream(self.default_stream)
                all2all_output = self.overlap_handles[type + '_grad']
                return self.overlap_handles[type + '_post_all2all_func'](all2all_output)

            return hook_fun

        qk_on_side_stream = self.sp_overlap_comm and _grad_mode()
        if qk_on_side_stream:
            self.sp_stream.wait_stream(self.default_stream)
            with get_accelerator().stream(self.sp_stream):
                query_layer = _SeqAllToAll.apply(self.spg, query, self.scatter_idx, self.gather_idx, batch_dim_idx,
                                                 None, self.overlap_handles, 'q')
                key_layer = _SeqAllToAll.apply(self.spg, key, self.scatter_idx, self.gather_idx, batch_dim_idx,
                                               None, self.overlap_handles, 'k')
        else:
            query_layer = _SeqAllToAll.apply(self.spg, query, self.scatter_idx, self.gather_idx, batch_dim_idx, None,
                                             self.overlap_handles, 'q')
            key_layer = _SeqAllToAll.apply(self.spg, key, self.scatter_idx, self.gather_idx, batch_dim_idx, None,
                                           self.overlap_handles, 'k')

        value_layer = _SeqAllToAll.apply(self.spg, value, self.scatter_idx, self.gather_idx, batch_dim_idx, None,
                                         self.overlap_handles, 'v')
        if qk_on_side_stream:
            self.default_stream.wait_stream(self.sp_stream)

        if self.sp_overlap_comm and _grad_mode():
            # Register a hook to synchronize dq and dk after the all-to-all
            # operation when the gradient data is used.
            query.register_hook(bwd_hook(layer_type='q'))
            key.register_hook(bwd_hook(layer_type='k'))

        context_layer = self.local_attn(query_layer, key_layer, value_layer, *args, **kwargs)

        output = _SeqAllToAll.apply(self.spg, context_layer, self.gather_idx, self.scatter_idx, batch_dim_idx,
                                    self.sp_stream if _grad_mode() else None, self.overlap_handles, 'o')
        return output
