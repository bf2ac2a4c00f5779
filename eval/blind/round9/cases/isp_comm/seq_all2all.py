from typing import Any, List, Optional, Union

import torch
from torch import distributed as dist
from torch import nn


class _SeqAllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, group: dist.ProcessGroup, scatter_idx: Union[List[int], int],
                gather_idx: Union[List[int], int], pipelined: bool, *input_: torch.Tensor):
        ctx.group = group
        ctx.scatter_idx = scatter_idx
        ctx.gather_idx = gather_idx
        seq_world_size = dist.get_world_size(group)
        if seq_world_size <= 1:
            return input_[0] if len(input_) == 1 else input_

        outputs = []
        handles = []
        pending = []
        for i, tensor in enumerate(input_):
            input_list = [t.contiguous() for t in torch.tensor_split(tensor, seq_world_size, scatter_idx[i])]
            output_list = [torch.empty_like(input_list[0]) for _ in range(seq_world_size)]
            handle = dist.all_to_all(output_list, input_list, group=group, async_op=pipelined)
            handles.append(handle)
            pending.append(output_list)
        for i, output_list in enumerate(pending):
            if handles[i] is not None:
                handles[i].wait()
            outputs.append(torch.cat(output_list, dim=gather_idx[i]).contiguous())
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    @staticmethod
    def backward(ctx, *grad_output: torch.Tensor):
        res = _SeqAllToAll.apply(ctx.group, ctx.gather_idx, ctx.scatter_idx, False, *grad_output)
        if not isinstance(res, tuple):
            res = (res,)
        return (None, None, None, None, *res)


class DistributedAttention(nn.Module):
    def __init__(self, local_attention: nn.Module, sequence_process_group: dist.ProcessGroup,
                 scatter_idx: int = 2, gather_idx: int = 0) -> None:
        super().__init__()
        self.local_attn = local_attention
        self.spg = sequence_process_group
        self.scatter_idx = scatter_idx
        self.gather_idx = gather_idx

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *args: Any, **kwargs: Any):
        q, k, v = _SeqAllToAll.apply(
            self.spg,
            [self.scatter_idx] * 3,
            [self.gather_idx] * 3,
            torch.is_grad_enabled(),
            q, k, v,
        )
        context = self.local_attn(q, k, v, *args, **kwargs)
        output = _SeqAllToAll.apply(self.spg, [self.gather_idx], [self.scatter_idx], False, context)
        return output
