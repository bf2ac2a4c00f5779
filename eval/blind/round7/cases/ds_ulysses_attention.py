from typing import Any, Tuple

import torch
import torch.distributed as dist
from torch import Tensor
from torch.nn import Module


def _single_all_to_all(input, scatter_idx, gather_idx, group, async_op=False, handle=None, type=None):
    seq_world_size = dist.get_world_size(group)
    inp_shape = list(input.shape)
    inp_shape[scatter_idx] = inp_shape[scatter_idx] // seq_world_size
    input_t = input.reshape([seq_world_size] + inp_shape).contiguous()
    output = torch.empty_like(input_t)
    work = dist.all_to_all_single(output, input_t, group=group, async_op=async_op)
    if async_op:
        handle[type] = work
        handle[type + "_grad"] = output
    return output


class _SeqAllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, group, input: Tensor, scatter_idx: int, gather_idx: int,
                stream=None, handle=None, type=None, is_fwd=True) -> Tensor:
        ctx.group = group
        ctx.scatter_idx = scatter_idx
        ctx.gather_idx = gather_idx
        ctx.stream = stream
        ctx.handle = handle
        ctx.type = type
        if ctx.handle is None:
            return _single_all_to_all(input, scatter_idx, gather_idx, group, False)
        return _single_all_to_all(input, scatter_idx, gather_idx, group, True, handle, type)

    @staticmethod
    def backward(ctx: Any, *grad_output: Tensor) -> Tuple[None, Tensor, None, None]:
        return (None, _SeqAllToAll.apply(ctx.group, *grad_output, ctx.gather_idx, ctx.scatter_idx,
                                         ctx.stream, ctx.handle, ctx.type, False),
                None, None, None, None, None, None)


class DistributedAttention(Module):
    def __init__(self, local_attention: Module, sequence_process_group: dist.ProcessGroup,
                 scatter_idx: int = 2, gather_idx: int = 0, sp_stream=None) -> None:
        super().__init__()
        self.local_attn = local_attention
        self.spg = sequence_process_group
        self.scatter_idx = scatter_idx
        self.gather_idx = gather_idx
        self.sp_overlap_comm = sp_stream is not None
        self.sp_stream = sp_stream
        self.overlap_handles = {} if self.sp_overlap_comm else None
        self.default_stream = torch.cuda.default_stream() if self.sp_overlap_comm else None

    def layer_sync(self, layer):
        if self.sp_overlap_comm and hasattr(layer, "done_event"):
            self.default_stream.wait_event(layer.done_event)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, batch_dim_idx: int, *args: Any) -> Tensor:
        grad_mode = torch.is_grad_enabled()

        def bwd_hook(layer_type):
            def pre_hook_fun(grad):
                type = "d" + layer_type
                self.overlap_handles[type].wait()
                self.sp_stream.wait_stream(self.default_stream)
                return grad
            return pre_hook_fun

        handles = self.overlap_handles if (self.sp_overlap_comm and grad_mode) else None
        query_layer = _SeqAllToAll.apply(self.spg, query, self.scatter_idx, self.gather_idx, self.sp_stream, handles, "q")
        key_layer = _SeqAllToAll.apply(self.spg, key, self.scatter_idx, self.gather_idx, self.sp_stream, handles, "k")
        if handles is not None:
            handles["q"].wait()
            handles["k"].wait()
        value_layer = _SeqAllToAll.apply(self.spg, value, self.scatter_idx, self.gather_idx, None, None, "v")

        if self.sp_overlap_comm and grad_mode and query_layer.requires_grad:
            query_layer.register_hook(bwd_hook(layer_type="q"))
            key_layer.register_hook(bwd_hook(layer_type="k"))

        context_layer = self.local_attn(query_layer, key_layer, value_layer, *args)
        output = _SeqAllToAll.apply(self.spg, context_layer, self.gather_idx, self.scatter_idx)
        return output
