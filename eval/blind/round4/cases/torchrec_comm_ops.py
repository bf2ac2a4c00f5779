# Modeled on torchrec torchrec/distributed/comm_ops.py (alltoall_pooled, get_use_sync_collectives)
# and torchrec/distributed/dist_data.py (PooledEmbeddingsAllToAll.forward).
from typing import List, Optional

import torch
import torch.distributed as dist
from torch import nn

_USE_SYNC_COLLECTIVES = False


def get_use_sync_collectives() -> bool:
    return _USE_SYNC_COLLECTIVES


class NoWait:
    def __init__(self, obj):
        self._obj = obj

    def wait(self):
        return self._obj


class All2AllPooledInfo:
    def __init__(self, batch_size_per_rank, dim_sum_per_rank, dim_sum_per_rank_tensor,
                 cumsum_dim_sum_per_rank_tensor, codecs=None):
        self.batch_size_per_rank = batch_size_per_rank
        self.dim_sum_per_rank = dim_sum_per_rank
        self.dim_sum_per_rank_tensor = dim_sum_per_rank_tensor
        self.cumsum_dim_sum_per_rank_tensor = cumsum_dim_sum_per_rank_tensor
        self.codecs = codecs


def alltoall_pooled(a2a_pooled_embs_tensor, batch_size_per_rank, dim_sum_per_rank,
                    dim_sum_per_rank_tensor=None, cumsum_dim_sum_per_rank_tensor=None,
                    group=None, codecs=None):
    from torchrec.distributed.comm_ops import All2All_Pooled_Req, Request, all2all_pooled_sync
    if group is None:
        group = dist.distributed_c10d._get_default_group()
    if dist.get_world_size(group) <= 1:
        return NoWait(a2a_pooled_embs_tensor)
    myreq = Request(group, device=a2a_pooled_embs_tensor.device)
    a2ai = All2AllPooledInfo(batch_size_per_rank, dim_sum_per_rank, dim_sum_per_rank_tensor,
                             cumsum_dim_sum_per_rank_tensor, codecs)
    if get_use_sync_collectives() or not torch.is_grad_enabled():
        return NoWait(all2all_pooled_sync(group, a2ai, a2a_pooled_embs_tensor))
    All2All_Pooled_Req.apply(group, myreq, a2ai, a2a_pooled_embs_tensor)
    return myreq


class PooledEmbeddingsAllToAll(nn.Module):
    def __init__(self, pg: dist.ProcessGroup, dim_sum_per_rank: List[int], device=None,
                 callbacks=None, codecs=None):
        super().__init__()
        self._pg = pg
        self._callbacks = callbacks or []
        self._dim_sum_per_rank = dim_sum_per_rank
        self._codecs = codecs
        self.register_buffer("_dim_sum_per_rank_tensor",
                             torch.tensor(dim_sum_per_rank, device=device, dtype=torch.int), persistent=False)
        self.register_buffer("_cumsum_dim_sum_per_rank_tensor",
                             torch.cumsum(torch.tensor(dim_sum_per_rank, device=device, dtype=torch.int), 0),
                             persistent=False)

    def forward(self, local_embs: torch.Tensor, batch_size_per_rank: Optional[List[int]] = None):
        if batch_size_per_rank is None:
            B_global = local_embs.size(0)
            batch_size_per_rank = [B_global // self._pg.size()] * self._pg.size()
        # quantized comm (fp16/bf16/fp8 codecs) is configured for the training run
        codecs = self._codecs if torch.is_grad_enabled() else None
        tensor_awaitable = alltoall_pooled(
            a2a_pooled_embs_tensor=local_embs,
            batch_size_per_rank=batch_size_per_rank,
            dim_sum_per_rank=self._dim_sum_per_rank,
            dim_sum_per_rank_tensor=self._dim_sum_per_rank_tensor,
            cumsum_dim_sum_per_rank_tensor=self._cumsum_dim_sum_per_rank_tensor,
            group=self._pg,
            codecs=codecs,
        )
        return tensor_awaitable
