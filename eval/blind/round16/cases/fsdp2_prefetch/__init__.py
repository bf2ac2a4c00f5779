# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/__init__.py
from ._common import TrainingState, _grad_on
from ._param_group import FSDPCommContext, FSDPParamGroup
from ._state import FSDPState

__all__ = ["FSDPState", "FSDPParamGroup", "FSDPCommContext", "TrainingState", "_grad_on"]
