# adapted from microsoft/DeepSpeed deepspeed/runtime/zero/parameter_offload.py
from .hooks import register_zero3_hooks, FWD_MODULE_STACK
from .coordinator import ParamCoordinator
