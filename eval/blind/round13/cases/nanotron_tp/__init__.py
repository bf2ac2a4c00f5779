# adapted from huggingface/nanotron src/nanotron/parallel/__init__.py
from .nn import TensorParallelColumnLinear, TensorParallelEmbedding, TensorParallelRowLinear

__all__ = ["TensorParallelColumnLinear", "TensorParallelRowLinear", "TensorParallelEmbedding"]
