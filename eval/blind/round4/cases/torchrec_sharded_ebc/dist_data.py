from typing import List, Optional

import torch
import torch.distributed as dist
from torch import nn


class PooledEmbeddingsReduceScatter(nn.Module):
    def __init__(self, pg: dist.ProcessGroup, codecs=None):
        super().__init__()
        self._pg = pg
        self._codecs = codecs

    def forward(self, local_embs: torch.Tensor, input_splits: Optional[List[int]] = None,
                grad_enabled: bool = True):
        from torchrec.distributed.comm_ops import reduce_scatter_pooled, reduce_scatter_v_pooled
        world = self._pg.size()
        if input_splits and len(set(input_splits)) > 1:
            return reduce_scatter_v_pooled(local_embs, input_splits, self._pg, codecs=self._codecs)
        if not grad_enabled:
            # eval: plain all-reduce then slice this rank's rows
            out = local_embs.clone()
            dist.all_reduce(out, group=self._pg)
            rows = out.size(0) // world
            return out[self._pg.rank() * rows : (self._pg.rank() + 1) * rows]
        return reduce_scatter_pooled(list(local_embs.chunk(world, dim=0)), self._pg, codecs=self._codecs)
