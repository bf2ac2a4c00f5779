# adapted from pytorch/torchrec torchrec/distributed/dist_data.py
from .comm_context import EmbeddingCommContext, make_comm_context
from .dist_data import PooledEmbeddingsAllToAll, PooledEmbeddingsReduceScatter
from .embeddingbag import ShardedEmbeddingBagCollection
