# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_state.py
from ._fsdp_param_group import FSDPCommContext, FSDPParamGroup
from ._fsdp_state import FSDPState

__all__ = ["FSDPCommContext", "FSDPParamGroup", "FSDPState"]
