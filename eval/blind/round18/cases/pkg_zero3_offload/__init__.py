# adapted from microsoft/DeepSpeed deepspeed/runtime/zero/parameter_offload.py
from .parameter_offload import DeepSpeedZeRoOffload
from .partitioned_param_coordinator import PartitionedParameterCoordinator

__all__ = ["DeepSpeedZeRoOffload", "PartitionedParameterCoordinator"]
