# adapted from pytorch/torchrec torchrec/distributed/dist_data.py
import itertools
from typing import Callable, List, Optional

import torch
import torch.distributed as dist
from torch import nn

from torchrec.distributed.comm_ops import alltoall_pooled, reduce_scatter_pooled, reduce_scatter_v_pooled
from torchrec.distributed.types import Awaitable, QuantizedCommCodecs

from .comm_context import EmbeddingCommContext


class PooledEmbeddingsAwaitable(Awaitable[torch.Tensor]):
    def __init__(self, tensor_awaitable: Awaitable[torch.Tensor]) -> None:
        super().__init__()
        self._tensor_awaitable = tensor_awaitable

    def _wait_impl(self) -> torch.Tensor:
        ret = self._tensor_awaitable.wait()
        return ret


class PooledEmbeddingsAllToAll(nn.Module):
    def __init__(self, pg: dist.ProcessGroup, dim_sum_per_rank: List[int], device: Optional[torch.device] = None,
                 codecs: Optional[QuantizedCommCodecs] = None) -> None:
        super().__init__()
        self._pg = pg
        self._dim_sum_per_rank = dim_sum_per_rank
        self._codecs = codecs
        self._num_train_calls = 0
        self.register_buffer(
            "_dim_sum_per_rank_tensor",
            torch.tensor(dim_sum_per_rank, device=device, dtype=torch.int),
        )
        cumsum_dim_sum_per_rank = list(itertools.accumulate(dim_sum_per_rank))
        self.register_buffer(
            "_cumsum_dim_sum_per_rank_tensor",
            torch.tensor(cumsum_dim_sum_per_rank, device=device, dtype=torch.int),
        )

    def forward(self, local_embs: torch.Tensor, ctx: EmbeddingCommContext) -> PooledEmbeddingsAwaitable:
        batch_size_per_rank = ctx.batch_size_per_rank
        if not batch_size_per_rank:
            B_global = local_embs.size(0)
            B_local = B_global // self._pg.size()
            batch_size_per_rank = [B_local] * self._pg.size()
        if ctx.grad_enabled:
            self._num_train_calls += 1  # logged by the train pipeline only
        # quantized comm codecs are tuned for the training step
        codecs = self._codecs if ctx.grad_enabled else None
        tensor_awaitable = alltoall_pooled(
            a2a_pooled_embs_tensor=local_embs,
            batch_size_per_rank=batch_size_per_rank,
            dim_sum_per_rank=self._dim_sum_per_rank,
            dim_sum_per_rank_tensor=self._dim_sum_per_rank_tensor,
            cumsum_dim_sum_per_rank_tensor=self._cumsum_dim_sum_per_rank_tensor,
            group=self._pg,
            codecs=codecs,
        )
        return PooledEmbeddingsAwaitable(tensor_awaitable=tensor_awaitable)


class PooledEmbeddingsReduceScatter(nn.Module):
    def __init__(self, pg: dist.ProcessGroup, codecs: Optional[QuantizedCommCodecs] = None) -> None:
        super().__init__()
        self._pg = pg
        self._codecs = codecs

    def forward(self, local_embs: torch.Tensor, ctx: EmbeddingCommContext,
                input_splits: Optional[List[int]] = None) -> PooledEmbeddingsAwaitable:
        match (ctx.grad_enabled, input_splits):
            case (True, splits) if splits and len(set(splits)) > 1:
                tensor_awaitable = reduce_scatter_v_pooled(
                    local_embs, input_splits, self._pg, codecs=self._codecs
                )
            case _:
                tensor_awaitable = reduce_scatter_pooled(
                    list(local_embs.chunk(self._pg.size())), self._pg, codecs=self._codecs
                )
        return PooledEmbeddingsAwaitable(tensor_awaitable=tensor_awaitable)
