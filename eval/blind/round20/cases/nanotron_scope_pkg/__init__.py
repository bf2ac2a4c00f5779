# adapted from huggingface/nanotron src/nanotron/parallel/tensor_parallel/functional.py
from ._ctx import tp_forward_scope, tp_grad_enabled
from .nn import TensorParallelColumnLinear

__all__ = ["tp_forward_scope", "tp_grad_enabled", "TensorParallelColumnLinear"]
