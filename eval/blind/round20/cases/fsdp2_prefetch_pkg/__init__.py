# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_state.py
from ._fsdp_state import FSDPState
from ._grad_state import forward_prefetch_enabled, record_grad_mode

__all__ = ["FSDPState", "forward_prefetch_enabled", "record_grad_mode"]
