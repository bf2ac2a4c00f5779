"""FSDP2 per-module state split into state / mixed-precision / prefetch modules (cf. torch/distributed/fsdp/_fully_shard)."""
from ._fsdp_state import FSDPState, FSDPStateContext

__all__ = ["FSDPState", "FSDPStateContext"]
