"""Tensor-parallel communication layer split like vllm/distributed (parallel_state + communication_op)."""
from .communication_op import (
    tensor_model_parallel_all_gather,
    tensor_model_parallel_all_reduce,
    tensor_model_parallel_all_reduce_differentiable,
)

__all__ = [
    "tensor_model_parallel_all_gather",
    "tensor_model_parallel_all_reduce",
    "tensor_model_parallel_all_reduce_differentiable",
]
