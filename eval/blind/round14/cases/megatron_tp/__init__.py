# adapted from NVIDIA/Megatron-LM megatron/core/tensor_parallel/__init__.py
from .layers import ColumnParallelLinear, RowParallelLinear
from .mappings import (
    copy_to_tensor_model_parallel_region,
    gather_from_sequence_parallel_region,
    make_output_reducer,
    reduce_from_tensor_model_parallel_region,
)
from .utils import CommPlan, build_comm_plan, split_tensor_along_last_dim

__all__ = [
    "ColumnParallelLinear",
    "RowParallelLinear",
    "CommPlan",
    "build_comm_plan",
    "copy_to_tensor_model_parallel_region",
    "gather_from_sequence_parallel_region",
    "make_output_reducer",
    "reduce_from_tensor_model_parallel_region",
    "split_tensor_along_last_dim",
]
