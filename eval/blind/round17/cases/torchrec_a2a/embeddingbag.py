# adapted from pytorch/torchrec torchrec/distributed/embeddingbag.py
from typing import List

import torch
from torch import nn

from .comm_context import make_comm_context
from .dist_data import PooledEmbeddingsAllToAll, PooledEmbeddingsReduceScatter


class ShardedEmbeddingBagCollection(nn.Module):
    def __init__(self, lookups: List[nn.Module], output_dists: List[nn.Module]):
        super().__init__()
        self._lookups = nn.ModuleList(lookups)
        self._output_dists = nn.ModuleList(output_dists)

    def output_dist(self, features, batch_size_per_rank: List[int]):
        ctx = make_comm_context(batch_size_per_rank)
        awaitables = []
        for lookup, dist in zip(self._lookups, self._output_dists):
            embs = lookup(features)
            awaitables.append(dist(embs, ctx))
        return awaitables

    def forward(self, features, batch_size_per_rank: List[int]):
        return [w.wait() for w in self.output_dist(features, batch_size_per_rank)]
