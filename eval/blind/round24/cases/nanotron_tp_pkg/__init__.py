# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
from .config import TPConfig
from .layers import TensorParallelColumnLinear, TensorParallelRowLinear
