# adapted from microsoft/DeepSpeed deepspeed/runtime/zero/parameter_offload.py
from .coordinator import PartitionedParameterCoordinator
from .offload import DeepSpeedZeRoOffload

__all__ = ["PartitionedParameterCoordinator", "DeepSpeedZeRoOffload"]
