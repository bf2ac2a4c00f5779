# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
from .flags import grad_flags
from .linear import column_linear

__all__ = ["grad_flags", "column_linear"]
