from typing import Optional

import torch
import torch.nn as nn

from .context import make_context
from .output_dist import reduce_scatter_pooled


class ShardedPooledEmbedding(nn.Module):
    def __init__(self, lookup: nn.Module, pg, grad_scale: Optional[float] = None) -> None:
        super().__init__()
        self._lookup = lookup
        self._pg = pg
        self._grad_scale = grad_scale
        self._dist_stream = torch.cuda.Stream() if torch.cuda.is_available() else None

    def _scale(self, grad: torch.Tensor) -> torch.Tensor:
        return grad * self._grad_scale

    def forward(self, features):
        ctx = make_context(self._dist_stream, batch_size=features.stride())
        embs = self._lookup(features)
        if ctx.build_graph and self._grad_scale is not None:
            embs.register_hook(self._scale)
        return reduce_scatter_pooled(embs, self._pg, ctx)
