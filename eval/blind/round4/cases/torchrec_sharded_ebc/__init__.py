# Modeled on torchrec torchrec/distributed/embeddingbag.py (ShardedEmbeddingBagCollection,
# EmbeddingBagCollectionContext) and torchrec/distributed/dist_data.py
# (PooledEmbeddingsReduceScatter / variable-batch all-to-all).
from .context import EmbeddingBagCollectionContext
from .dist_data import PooledEmbeddingsReduceScatter
from .embeddingbag import ShardedEmbeddingBagCollection
