# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/__init__.py
from ._fsdp_param_group import FSDPParamGroup
from ._fsdp_state import FSDPState
