"""DeepSpeed AutoTP replaced layers split into comm_ops and layers (cf. deepspeed/module_inject/layers.py)."""
from .layers import LinearAllreduce, LinearLayer, LmHeadLinearAllreduce

__all__ = ["LinearAllreduce", "LinearLayer", "LmHeadLinearAllreduce"]
