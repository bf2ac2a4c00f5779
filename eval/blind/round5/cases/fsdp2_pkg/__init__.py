"""Modelled on PyTorch torch/distributed/fsdp/_fully_shard/_fsdp_state.py, _fsdp_param_group.py
and _fsdp_collectives.py (foreach_all_gather) for FSDP2 fully_shard."""
from .state import FSDPState

__all__ = ["FSDPState"]
