# Adapted from pytorch/torchrec torchrec/distributed/dist_data.py and embedding_sharding.py
# (PooledEmbeddingsAllToAll, awaitable callbacks)
import torch
import torch.distributed as dist


class PooledEmbeddingsAllToAll(torch.nn.Module):
    def __init__(self, pg, dim_sum_per_rank):
        super().__init__()
        self._pg = pg
        self._dim_sum_per_rank = dim_sum_per_rank
        self._saved = []

    def _a2a_async(self, out, inp):
        return dist.all_to_all_single(out, inp, group=self._pg, async_op=True)

    def _a2a_sync(self, out, inp):
        dist.all_to_all_single(out, inp, group=self._pg)
        return None

    def _record_for_backward(self, t):
        self._saved.append(t.shape)

    def forward(self, local_embs: torch.Tensor):
        pick = lambda: self._a2a_async if torch.is_grad_enabled() else self._a2a_sync
        out = torch.empty_like(local_embs)
        work = pick()(out, local_embs)
        if torch.is_grad_enabled():
            self._record_for_backward(local_embs)
        if work is not None:
            work.wait()
        return out
