from typing import Dict, List

import torch
from torch import nn

from .context import EmbeddingBagCollectionContext
from .dist_data import PooledEmbeddingsReduceScatter


class ShardedEmbeddingBagCollection(nn.Module):
    def __init__(self, lookups: List[nn.Module], pg, qcomm_codecs_registry: Dict[str, object] = None):
        super().__init__()
        self._lookups = nn.ModuleList(lookups)
        self._pg = pg
        self._qcomm_codecs_registry = qcomm_codecs_registry
        self._output_dists = nn.ModuleList(
            [PooledEmbeddingsReduceScatter(pg, codecs=None) for _ in lookups]
        )
        self._backward_lookup_calls = 0

    def create_context(self) -> EmbeddingBagCollectionContext:
        return EmbeddingBagCollectionContext()

    def _pick_codecs(self, ctx: EmbeddingBagCollectionContext, sharding_type: str):
        if self._qcomm_codecs_registry is None or not ctx.grad_enabled:
            return None
        return self._qcomm_codecs_registry.get(sharding_type)

    def compute_and_output_dist(self, ctx: EmbeddingBagCollectionContext, features: List[torch.Tensor]):
        outputs = []
        for i, (lookup, odist, feats) in enumerate(zip(self._lookups, self._output_dists, features)):
            local_embs = lookup(feats)
            odist._codecs = self._pick_codecs(ctx, "table_wise")
            outputs.append(odist(local_embs, grad_enabled=ctx.grad_enabled))
            if ctx.grad_enabled:
                # counts lookups whose backward (sparse grad push) will have to run
                self._backward_lookup_calls += 1
        return torch.cat(outputs, dim=-1)

    def forward(self, features: List[torch.Tensor]):
        ctx = self.create_context()
        return self.compute_and_output_dist(ctx, features)
