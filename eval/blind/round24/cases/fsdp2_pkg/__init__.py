# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_state.py
from ._fsdp_state import FSDPState
from ._fsdp_param_group import FSDPCommContext, FSDPParamGroup
