# adapted from pytorch/torchrec torchrec/distributed/dist_data.py
from typing import List, Optional

import torch
import torch.distributed as dist
from torch import nn
from torch.autograd.profiler import record_function

from .codecs import QuantizedCommCodec
from .comm_plan import make_comm_plan

try:
    from torch._dynamo import is_compiling as is_torchdynamo_compiling
except Exception:

    def is_torchdynamo_compiling() -> bool:  # type: ignore[misc]
        return False


class PooledEmbeddingsAllToAll(nn.Module):
    """Shards batches and collects keys of tensor with a ProcessGroup according to dim_sum_per_rank."""

    def __init__(
        self,
        pg: dist.ProcessGroup,
        dim_sum_per_rank: List[int],
        device: Optional[torch.device] = None,
        forward_codec: Optional[QuantizedCommCodec] = None,
        backward_codec: Optional[QuantizedCommCodec] = None,
    ) -> None:
        super().__init__()
        self._pg = pg
        self._dim_sum_per_rank = dim_sum_per_rank
        self._device = device
        self._forward_codec = forward_codec
        self._backward_codec = backward_codec
        self._saved_splits = None

    def forward(self, local_embs: torch.Tensor, batch_size_per_rank: Optional[List[int]] = None):
        plan = make_comm_plan(self._forward_codec, self._backward_codec)
        world_size = self._pg.size()
        B_global = local_embs.size(0)
        if batch_size_per_rank is None:
            batch_size_per_rank = [B_global // world_size] * world_size
        input_split_sizes = [bs * sum(self._dim_sum_per_rank) // len(self._dim_sum_per_rank) for bs in batch_size_per_rank]
        output_split_sizes = [B_global // world_size * d for d in self._dim_sum_per_rank]

        qctx = None
        send = local_embs.flatten()
        if plan.grad_mode and plan.has_forward_codec:
            qctx = self._forward_codec.create_context()
            send = self._forward_codec.encode(send, qctx)
        if plan.grad_mode and plan.has_backward_codec:
            # the reverse all-to-all in backward reuses these splits
            self._saved_splits = (input_split_sizes, output_split_sizes)

        recv = torch.empty(sum(output_split_sizes), device=send.device, dtype=send.dtype)
        with record_function("## alltoall_fwd_single ##"):
            work = dist.all_to_all_single(
                output=recv,
                input=send,
                output_split_sizes=output_split_sizes,
                input_split_sizes=input_split_sizes,
                group=self._pg,
                async_op=plan.grad_mode and not is_torchdynamo_compiling(),
            )
        # overlap the in-flight all-to-all with preparing the output layout
        out_rows = B_global // world_size
        if work is not None:
            work.wait()
        if qctx is not None:
            recv = self._forward_codec.decode(recv, qctx)
        return recv.view(out_rows, -1)
