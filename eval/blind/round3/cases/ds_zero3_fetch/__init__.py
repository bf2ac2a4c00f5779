# Modelled on deepspeed/runtime/zero/ (DeepSpeed v0.10-0.14, ZeRO-3 / ZeRO++ hpZ).
from .parameter_offload import DeepSpeedZeRoOffload

__all__ = ["DeepSpeedZeRoOffload"]
