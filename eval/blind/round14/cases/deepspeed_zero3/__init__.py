# adapted from microsoft/DeepSpeed deepspeed/runtime/zero/__init__.py
from .parameter_offload import DeepSpeedZeRoOffload
from .partitioned_param_coordinator import PartitionedParameterCoordinator
from .utils import apply_to_tensors_only, is_zero_param, zero_fetch_context

__all__ = [
    "DeepSpeedZeRoOffload",
    "PartitionedParameterCoordinator",
    "apply_to_tensors_only",
    "is_zero_param",
    "zero_fetch_context",
]
