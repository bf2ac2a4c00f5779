"""Ulysses sequence-parallel attention with optional communication overlap."""
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor


def single_all_to_all(input, scatter_idx, gather_idx, group, async_op=False, handle=None, type=None):
    seq_world_size = dist.get_world_size(group)
    inp_shape = list(input.shape)
    inp_shape[scatter_idx] = inp_shape[scatter_idx] // seq_world_size
    input_t = input.reshape([seq_world_size, inp_shape[scatter_idx]] + inp_shape[scatter_idx + 1:]).contiguous()
    output = torch.empty_like(input_t)
    work = dist.all_to_all_single(output, input_t, group=group, async_op=async_op)
    if async_op:
        handle[type + "_work"] = work
        handle[type + "_grad"] = output
        return output
    return output.reshape(inp_shape[:gather_idx] + [-1] + inp_shape[gather_idx + 1:])


class DistributedAttention(torch.nn.Module):
    def __init__(self, local_attention, sequence_process_group: dist.ProcessGroup, scatter_idx: int = 2,
                 gather_idx: int = 0, sp_stream=None) -> None:
        super().__init__()
        self.local_attn = local_attention
        self.spg = sequence_process_group
        self.scatter_idx = scatter_idx
        self.gather_idx = gather_idx
        self.sp_overlap_comm = sp_stream is not None
        self.sp_stream = sp_stream
        self.overlap_handles = {}
        self.default_stream = torch.cuda.current_stream() if torch.cuda.is_available() else None

    def _overlap_enabled(self) -> bool:
        try:
            grad_on = torch.is_grad_enabled()
        except RuntimeError:
            grad_on = False
        return self.sp_overlap_comm and grad_on

    def forward(self, query: Tensor, key: Tensor, value: Tensor, *args: Any, **kwargs) -> Tensor:
        overlap = self._overlap_enabled()
        if overlap:
            with torch.cuda.stream(self.sp_stream):
                query_layer = single_all_to_all(query, self.scatter_idx, self.gather_idx, self.spg,
                                                async_op=True, handle=self.overlap_handles, type="q")
                key_layer = single_all_to_all(key, self.scatter_idx, self.gather_idx, self.spg,
                                              async_op=True, handle=self.overlap_handles, type="k")
            for t in ("q", "k"):
                self.overlap_handles[t + "_work"].wait()
            self.default_stream.wait_stream(self.sp_stream)
        else:
            query_layer = single_all_to_all(query, self.scatter_idx, self.gather_idx, self.spg)
            key_layer = single_all_to_all(key, self.scatter_idx, self.gather_idx, self.spg)
        value_layer = single_all_to_all(value, self.scatter_idx, self.gather_idx, self.spg)
        context_layer = self.local_attn(query_layer, key_layer, value_layer, *args, **kwargs)
        output = single_all_to_all(context_layer, self.gather_idx, self.scatter_idx, self.spg)
        return output
