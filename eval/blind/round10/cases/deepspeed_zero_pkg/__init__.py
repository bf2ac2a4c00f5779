# Package adapted from microsoft/DeepSpeed deepspeed/runtime/zero/{parameter_offload.py,partitioned_param_coordinator.py}
from .base import GradAwareHookBase
from .coordinator import ZeroParamCoordinator
