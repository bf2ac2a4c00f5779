# Adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/nn.py and functional.py
# (TensorParallelColumnLinear / TensorParallelRowLinear, column_linear / row_linear).
from .layers import TensorParallelColumnLinear, TensorParallelRowLinear

__all__ = ["TensorParallelColumnLinear", "TensorParallelRowLinear"]
