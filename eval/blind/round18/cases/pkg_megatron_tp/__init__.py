# adapted from NVIDIA/Megatron-LM megatron/core/tensor_parallel/layers.py
from .layers import ColumnParallelLinear, RowParallelLinear
from .linear_impl import linear_with_grad_accumulation_and_async_allreduce
from .mappings import reduce_from_tensor_model_parallel_region, set_tp_comm_overlap

__all__ = [
    "ColumnParallelLinear",
    "RowParallelLinear",
    "linear_with_grad_accumulation_and_async_allreduce",
    "reduce_from_tensor_model_parallel_region",
    "set_tp_comm_overlap",
]
