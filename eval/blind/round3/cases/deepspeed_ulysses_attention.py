# Modelled on deepspeed/sequence/layer.py DistributedAttention (DeepSpeed v0.14-0.16).
from typing import Any

import torch
from torch import Tensor
from torch.nn import Module

import deepspeed.comm as dist
from deepspeed.accelerator import get_accelerator


def single_all_to_all(input, scatter_idx, gather_idx, batch_dim_idx, group, async_op=False, handle=None, type=None):
    seq_world_size = dist.get_world_size(group)
    inp_shape = list(input.shape)
    inp_shape[scatter_idx] = inp_shape[scatter_idx] // seq_world_size
    input_t = input.reshape([seq_world_size, -1] + inp_shape[scatter_idx:]).contiguous()
    output = torch.empty_like(input_t)
    work = dist.all_to_all_single(output, input_t, group=group, async_op=async_op)
    if async_op:
        handle[type] = work
    return output.reshape(inp_shape[:gather_idx] + [-1] + inp_shape[gather_idx + 1:]).contiguous()


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
        return single_all_to_all(input, scatter_idx, gather_idx, batch_dim_idx, group)

    @staticmethod
    def backward(ctx: Any, *grad_output):
        raise NotImplementedError


class DistributedAttention(Module):
    def __init__(self, local_attention: Module, sequence_process_group: dist.ProcessGroup, scatter_idx: int = 2,
                 gather_idx: int = 0, sp_stream=None) -> None:
        super().__init__()
        self.local_attn = local_attention
        self.spg = sequence_process_group
        self.scatter_idx = scatter_idx
        self.gather_idx = gather_idx
        self.sp_overlap_comm = sp_stream is not None
        self.overlap_handles = {} if sp_stream is not None else None
        self.sp_stream = sp_stream
        self.dafult_stream = get_accelerator().default_stream()

    def forward(self, query: Tensor, key: Tensor, value: Tensor, batch_dim_idx: int, *args: Any, **kwargs) -> Tensor:
        def bwd_hook(layer_type):
            def pre_hook_fun(grad):
                self.overlap_handles["d" + layer_type].wait()
                self.sp_stream.wait_stream(self.dafult_stream)
            return pre_hook_fun

        overlap_fwd = self.sp_overlap_comm and torch.is_grad_enabled()
        if overlap_fwd:
            self.sp_stream.wait_stream(self.dafult_stream)
            with get_accelerator().stream(self.sp_stream):
                query_layer = _SeqAllToAll.apply(self.spg, query, self.scatter_idx, self.gather_idx, batch_dim_idx)
                key_layer = _SeqAllToAll.apply(self.spg, key, self.scatter_idx, self.gather_idx, batch_dim_idx)
            value_layer = _SeqAllToAll.apply(self.spg, value, self.scatter_idx, self.gather_idx, batch_dim_idx)
            self.dafult_stream.wait_stream(self.sp_stream)
        else:
            query_layer = _SeqAllToAll.apply(self.spg, query, self.scatter_idx, self.gather_idx, batch_dim_idx)
            key_layer = _SeqAllToAll.apply(self.spg, key, self.scatter_idx, self.gather_idx, batch_dim_idx)
            value_layer = _SeqAllToAll.apply(self.spg, value, self.scatter_idx, self.gather_idx, batch_dim_idx)

        if self.sp_overlap_comm and torch.is_grad_enabled() and query.grad_fn is not None:
            grad_fn_q = query.grad_fn.next_functions[0][0]
            grad_fn_q.register_prehook(bwd_hook(layer_type="q"))
            grad_fn_k = key.grad_fn.next_functions[0][0]
            grad_fn_k.register_prehook(bwd_hook(layer_type="k"))

        context_layer = self.local_attn(query_layer, key_layer, value_layer, *args, **kwargs)
        output = _SeqAllToAll.apply(self.spg, context_layer, self.gather_idx, self.scatter_idx, batch_dim_idx,
                                    self.sp_stream, self.overlap_handles, "o")
        return output
