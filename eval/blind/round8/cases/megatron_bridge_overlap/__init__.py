from .config import CommOverlapConfig
from .runtime import RuntimeFlags, resolve_runtime_flags
from .step import forward_step

__all__ = ["CommOverlapConfig", "RuntimeFlags", "resolve_runtime_flags", "forward_step"]
