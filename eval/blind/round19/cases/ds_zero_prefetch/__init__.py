# adapted from deepspeedai/DeepSpeed deepspeed/runtime/zero/parameter_offload.py
from .state import FWD_STATE
from .hooks import DeepSpeedZeRoOffload

__all__ = ["FWD_STATE", "DeepSpeedZeRoOffload"]
