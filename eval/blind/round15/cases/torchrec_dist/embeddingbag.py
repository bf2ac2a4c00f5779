# adapted from pytorch/torchrec torchrec/distributed/embeddingbag.py
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Tuple

import torch
from torch import nn

from torchrec.distributed.embedding_sharding import EmbeddingSharding, KJTListSplitsAwaitable
from torchrec.distributed.types import Awaitable, LazyAwaitable, NullShardedModuleContext, ShardedModule
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor, KeyedTensor

from .comm_ops import get_use_sync_collectives, set_use_sync_collectives


@contextmanager
def _maybe_sync_collectives() -> Iterator[None]:
    prev = get_use_sync_collectives()
    set_use_sync_collectives(prev or not torch.is_grad_enabled())
    try:
        yield
    finally:
        set_use_sync_collectives(prev)


class EmbeddingBagCollectionAwaitable(LazyAwaitable[KeyedTensor]):
    def __init__(self, awaitables: List[Awaitable[torch.Tensor]], embedding_dims: List[int], embedding_names: List[str]) -> None:
        super().__init__()
        self._awaitables = awaitables
        self._embedding_dims = embedding_dims
        self._embedding_names = embedding_names

    def _wait_impl(self) -> KeyedTensor:
        return KeyedTensor(
            keys=self._embedding_names,
            values=torch.cat([w.wait() for w in self._awaitables], dim=1),
            length_per_key=self._embedding_dims,
            key_dim=1,
        )


class ShardedEmbeddingBagCollection(ShardedModule):
    """
    Sharded implementation of EmbeddingBagCollection.
    This is part of the public API to allow for manual data dist pipelining.
    """

    def __init__(self, sharding_type_to_sharding: Dict[str, EmbeddingSharding], device: Optional[torch.device] = None) -> None:
        super().__init__()
        self._sharding_type_to_sharding = sharding_type_to_sharding
        self._device = device
        self._lookups: List[nn.Module] = [sharding.create_lookup() for sharding in sharding_type_to_sharding.values()]
        self._output_dists: List[nn.Module] = [sharding.create_output_dist(device=device) for sharding in sharding_type_to_sharding.values()]
        self._input_dists: List[nn.Module] = [sharding.create_input_dist() for sharding in sharding_type_to_sharding.values()]
        self._embedding_dims: List[int] = []
        self._embedding_names: List[str] = []
        for sharding in sharding_type_to_sharding.values():
            self._embedding_dims.extend(sharding.embedding_dims())
            self._embedding_names.extend(sharding.embedding_names())
        self._features_order: List[int] = []

    def input_dist(self, ctx: NullShardedModuleContext, features: KeyedJaggedTensor) -> Awaitable[Any]:
        if self._features_order:
            features = features.permute(self._features_order)
        features_by_shards = features.split([sharding.feature_count() for sharding in self._sharding_type_to_sharding.values()])
        awaitables = []
        for input_dist, features_by_shard in zip(self._input_dists, features_by_shards):
            awaitables.append(input_dist(features_by_shard))
        return KJTListSplitsAwaitable(awaitables, ctx)

    def compute(self, ctx: NullShardedModuleContext, dist_input: List[KeyedJaggedTensor]) -> List[torch.Tensor]:
        return [lookup(features) for lookup, features in zip(self._lookups, dist_input)]

    def output_dist(self, ctx: NullShardedModuleContext, output: List[torch.Tensor]) -> LazyAwaitable[KeyedTensor]:
        awaitables = [dist(embeddings) for dist, embeddings in zip(self._output_dists, output)]
        return EmbeddingBagCollectionAwaitable(
            awaitables=awaitables,
            embedding_dims=self._embedding_dims,
            embedding_names=self._embedding_names,
        )

    def compute_and_output_dist(self, ctx: NullShardedModuleContext, input: List[KeyedJaggedTensor]) -> LazyAwaitable[KeyedTensor]:
        with _maybe_sync_collectives():
            return self.output_dist(ctx, self.compute(ctx, input))

    def create_context(self) -> NullShardedModuleContext:
        return NullShardedModuleContext()
