# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
from .functional import column_linear
from .nn import TensorParallelColumnLinear

__all__ = ["column_linear", "TensorParallelColumnLinear"]
