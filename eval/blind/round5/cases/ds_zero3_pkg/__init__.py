"""Modelled on DeepSpeed deepspeed/runtime/zero/parameter_offload.py (DeepSpeedZeRoOffload hooks),
partitioned_param_coordinator.py (PartitionedParameterCoordinator.fetch_sub_module) and
partition_parameters.py (all_gather_coalesced with hpZ secondary tensors)."""
from .hooks import DeepSpeedZeRoOffload

__all__ = ["DeepSpeedZeRoOffload"]
