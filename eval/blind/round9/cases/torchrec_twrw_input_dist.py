from typing import List, Optional

import torch
import torch.distributed as dist
from torch import nn

from torchrec.distributed.dist_data import KJTAllToAll, PooledEmbeddingsReduceScatter
from torchrec.distributed.embedding_types import BaseSparseFeaturesDist
from torchrec.distributed.types import Awaitable
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor


class TwRwSparseFeaturesDist(BaseSparseFeaturesDist[KeyedJaggedTensor]):
    def __init__(
        self,
        pg: dist.ProcessGroup,
        intra_pg: dist.ProcessGroup,
        id_list_features_per_rank: List[int],
        id_list_feature_hash_sizes: List[int],
        device: Optional[torch.device] = None,
        has_feature_processor: bool = False,
        need_pos: bool = False,
    ) -> None:
        super().__init__()
        self._pg = pg
        self._intra_pg = intra_pg
        self._world_size = pg.size()
        self._local_size = intra_pg.size()
        self._num_cross_nodes = self._world_size // self._local_size
        self._device = device
        self._has_feature_processor = has_feature_processor
        self._need_pos = need_pos
        self._id_list_features_per_rank = id_list_features_per_rank
        self._id_list_feature_block_sizes = [
            (hash_size + self._local_size - 1) // self._local_size
            for hash_size in id_list_feature_hash_sizes
        ]
        self._dist = KJTAllToAll(
            pg=pg,
            splits=id_list_features_per_rank,
            stagger=self._num_cross_nodes,
        )
        self._dist_intra = KJTAllToAll(
            pg=intra_pg,
            splits=[sum(id_list_features_per_rank)] * self._local_size,
            stagger=1,
        )

    def _bucketize(self, sparse_features: KeyedJaggedTensor) -> KeyedJaggedTensor:
        block_sizes = torch.tensor(self._id_list_feature_block_sizes, device=self._device, dtype=torch.int32)
        (
            bucketized_lengths,
            bucketized_indices,
            bucketized_weights,
            _,
            _,
        ) = torch.ops.fbgemm.block_bucketize_sparse_features(
            sparse_features.lengths().view(-1),
            sparse_features.values(),
            bucketize_pos=self._has_feature_processor,
            sequence=self._need_pos,
            block_sizes=block_sizes,
            my_size=self._local_size,
            weights=sparse_features.weights_or_none(),
        )
        return KeyedJaggedTensor(
            keys=sparse_features.keys() * self._local_size,
            values=bucketized_indices,
            weights=bucketized_weights,
            lengths=bucketized_lengths.view(-1),
            stride=sparse_features.stride(),
        )

    def _select_dist(self) -> KJTAllToAll:
        return self._dist if torch.is_grad_enabled() else self._dist_intra

    def forward(self, sparse_features: KeyedJaggedTensor) -> Awaitable[Awaitable[KeyedJaggedTensor]]:
        bucketized = self._bucketize(sparse_features)
        return self._select_dist()(bucketized)


class TwRwPooledEmbeddingDist(nn.Module):
    def __init__(self, cross_pg: dist.ProcessGroup, intra_pg: dist.ProcessGroup,
                 dim_sum_per_node: List[int]) -> None:
        super().__init__()
        self._intra_dist = PooledEmbeddingsReduceScatter(intra_pg)
        self._cross_pg = cross_pg
        self._dim_sum_per_node = dim_sum_per_node

    def forward(self, local_embs: torch.Tensor) -> Awaitable[torch.Tensor]:
        return self._intra_dist(local_embs)
