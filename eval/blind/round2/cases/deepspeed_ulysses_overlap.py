# Modelled on DeepSpeed deepspeed/sequence/layer.py (DistributedAttention, _SeqAllToAll)
import functools
from typing import Any

import torch
from torch import Tensor
from torch.nn import Module

import deepspeed.comm as dist
from deepspeed.accelerator import get_accelerator
from deepspeed.sequence.layer import post_all2all, pre_all2all_fun, _generate_layout_params


def single_all_to_all(input, scatter_idx, gather_idx, batch_dim_idx, group, async_op=False, handle=None, type=None):
    seq_world_size = dist.get_world_size(group)
    pre_all2all_inp_shape, pre_all2all_permute_idx, post_all2all_permute_idx, post_all2all_res_shape = \
        _generate_layout_params(scatter_idx, batch_dim_idx, seq_world_size, input)
    input_t = pre_all2all_fun(pre_all2all_permute_idx, pre_all2all_inp_shape, input)
    post_all2all_fun = post_all2all(post_all2all_permute_idx, post_all2all_res_shape)
    output = torch.empty_like(input_t)
    work = dist.all_to_all_single(output, input_t, group=group, async_op=async_op)
    if async_op:
        handle[type + '_work'] = work
        handle[type + '_grad'] = output
        handle[type + '_post_all2all_func'] = post_all2all_fun
        return output
    return post_all2all_fun(output)


class _SeqAllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, group, input: Tensor, scatter_idx: int, gather_idx: int, batch_dim_idx: int) -> Tensor:
        ctx.group = group
        ctx.scatter_idx = scatter_idx
        ctx.gather_idx = gather_idx
        ctx.batch_dim_idx = batch_dim_idx
        return single_all_to_all(input, scatter_idx, gather_idx, batch_dim_idx, group, False)

    @staticmethod
    def backward(ctx: Any, *grad_output: Tensor):
        return (None, _SeqAllToAll.apply(ctx.group, *grad_output, ctx.gather_idx, ctx.scatter_idx,
                                         ctx.batch_dim_idx), None, None, None)


def _with_grad_mode(fn):
    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        kwargs.setdefault("grad_mode", torch.is_grad_enabled())
        return fn(self, *args, **kwargs)

    return wrapper


class DistributedAttention(Module):
    def __init__(self, local_attention: Module, sequence_process_group, scatter_idx: int = 2, gather_idx: int = 0,
                 sp_stream=None) -> None:
        super().__init__()
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

    @_with_grad_mode
    def forward(self, query: Tensor, key: Tensor, value: Tensor, batch_dim_idx: int, *args: Any,
                grad_mode: bool = True, **kwargs) -> Tensor:

        def bwd_hook(layer_type):
            def hook_fun(grad):
                type = 'd' + layer_type
                self.overlap_handles[type + '_work'].wait()
                self.sp_stream.wait_stream(self.default_stream)
                return self.overlap_handles[type + '_post_all2all_func'](self.overlap_handles[type + '_grad'])

            return hook_fun

        fwd_overlap = self.sp_overlap_comm and grad_mode
        if fwd_overlap:
            # q/k all-to-all on the sequence-parallel stream, v on the default stream concurrently
            self.sp_stream.wait_stream(self.default_stream)
            with get_accelerator().stream(self.sp_stream):
                query_layer = _SeqAllToAll.apply(self.spg, query, self.scatter_idx, self.gather_idx, batch_dim_idx)
                key_layer = _SeqAllToAll.apply(self.spg, key, self.scatter_idx, self.gather_idx, batch_dim_idx)
            value_layer = _SeqAllToAll.apply(self.spg, value, self.scatter_idx, self.gather_idx, batch_dim_idx)
            self.default_stream.wait_stream(self.sp_stream)
        else:
            query_layer = _SeqAllToAll.apply(self.spg, query, self.scatter_idx, self.gather_idx, batch_dim_idx)
            key_layer = _SeqAllToAll.apply(self.spg, key, self.scatter_idx, self.gather_idx, batch_dim_idx)
            value_layer = _SeqAllToAll.apply(self.spg, value, self.scatter_idx, self.gather_idx, batch_dim_idx)

        if self.sp_overlap_comm and torch.is_grad_enabled():
            # synchronize dq and dk after the backward all-to-all when the gradient is used
            query.register_hook(bwd_hook(layer_type='q'))
            key.register_hook(bwd_hook(layer_type='k'))

        context_layer = self.local_attn(query_layer, key_layer, value_layer, *args, **kwargs)
        output = _SeqAllToAll.apply(self.spg, context_layer, self.gather_idx, self.scatter_idx, batch_dim_idx)
        return output
