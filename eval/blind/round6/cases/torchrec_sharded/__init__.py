from .context import EmbeddingDistContext, make_context
from .embedding import ShardedPooledEmbedding

__all__ = ["EmbeddingDistContext", "make_context", "ShardedPooledEmbedding"]
