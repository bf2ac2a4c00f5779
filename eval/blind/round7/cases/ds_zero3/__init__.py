from .hooks import ZeROOrderedDict, register_zero3_hooks
from .coordinator import PartitionedParameterCoordinator
from .allgather import all_gather_coalesced

__all__ = ["ZeROOrderedDict", "register_zero3_hooks", "PartitionedParameterCoordinator", "all_gather_coalesced"]
