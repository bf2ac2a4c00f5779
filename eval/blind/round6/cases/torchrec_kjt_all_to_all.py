"""Pooled-embedding all-to-all with optional quantized communication codecs."""
from typing import Dict, List, Optional

import torch
import torch.distributed as dist

from torchrec.distributed.comm_ops import alltoall_pooled, All2AllPooledInfo
from torchrec.distributed.types import Awaitable, QuantizedCommCodecs


class PooledEmbeddingsAwaitable(Awaitable[torch.Tensor]):
    def __init__(self, tensor_awaitable):
        super().__init__()
        self._tensor_awaitable = tensor_awaitable

    def _wait_impl(self) -> torch.Tensor:
        return self._tensor_awaitable.wait()


class PooledEmbeddingsAllToAll(torch.nn.Module):
    def __init__(
        self,
        pg: dist.ProcessGroup,
        dim_sum_per_rank: List[int],
        device: Optional[torch.device] = None,
        codecs: Optional[QuantizedCommCodecs] = None,
    ) -> None:
        super().__init__()
        self._pg = pg
        self._dim_sum_per_rank = dim_sum_per_rank
        self._device = device
        self._codecs = codecs

    def _pick_codecs(self, dist_kwargs: Dict[str, bool]) -> Optional[QuantizedCommCodecs]:
        if self._codecs is None:
            return None
        forward_codec = self._codecs.forward if dist_kwargs["grad"] else None
        backward_codec = self._codecs.backward if dist_kwargs["grad"] and dist_kwargs["needs_input_grad"] else None
        return QuantizedCommCodecs(forward=forward_codec, backward=backward_codec)

    def forward(self, local_embs: torch.Tensor, batch_size_per_rank: Optional[List[int]] = None):
        dist_kwargs = {
            "grad": torch.is_grad_enabled(),
            "needs_input_grad": local_embs.requires_grad,
        }
        codecs = self._pick_codecs(dist_kwargs)
        if batch_size_per_rank is None:
            B_global = local_embs.size(0)
            assert B_global % self._pg.size() == 0
            batch_size_per_rank = [B_global // self._pg.size()] * self._pg.size()
        tensor_awaitable = alltoall_pooled(
            a2a_pooled_embs_tensor=local_embs,
            batch_size_per_rank=batch_size_per_rank,
            dim_sum_per_rank=self._dim_sum_per_rank,
            group=self._pg,
            codecs=codecs,
        )
        return PooledEmbeddingsAwaitable(tensor_awaitable=tensor_awaitable)
