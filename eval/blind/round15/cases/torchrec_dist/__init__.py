# adapted from pytorch/torchrec torchrec/distributed/dist_data.py
from .comm_ops import alltoall_pooled, get_use_sync_collectives, set_use_sync_collectives
from .dist_data import PooledEmbeddingsAllToAll
from .embeddingbag import ShardedEmbeddingBagCollection
