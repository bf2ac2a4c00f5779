"""ZeRO stage-3 parameter fetching split into hooks and coordinator (cf. deepspeed/runtime/zero)."""
from .coordinator import PartitionedParameterCoordinator
from .hooks import ZeROOffloadHooks

__all__ = ["PartitionedParameterCoordinator", "ZeROOffloadHooks"]
