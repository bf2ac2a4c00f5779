# Adapted from deepspeedai/DeepSpeed deepspeed/runtime/zero/parameter_offload.py (module hooks) and
# deepspeed/runtime/zero/partitioned_param_coordinator.py (fetch_sub_module / release_sub_module).
from .coordinator import PartitionedParameterCoordinator
from .hooks import register_zero3_hooks

__all__ = ["PartitionedParameterCoordinator", "register_zero3_hooks"]
