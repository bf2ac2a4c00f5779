# adapted from microsoft/DeepSpeed deepspeed/runtime/zero/__init__.py
from .parameter_offload import DeepSpeedZeRoOffload
from .partitioned_param_coordinator import PartitionedParameterCoordinator
