# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/__init__.py
from ._fsdp_common import TrainingState
from ._fsdp_param_group import FSDPCommContext, FSDPParamGroup
from ._fsdp_state import FSDPState

__all__ = ["FSDPCommContext", "FSDPParamGroup", "FSDPState", "TrainingState"]
