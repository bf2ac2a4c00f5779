from .coordinator import PartitionedParameterCoordinator
from .hooks import register_zero3_hooks

__all__ = ["PartitionedParameterCoordinator", "register_zero3_hooks"]
