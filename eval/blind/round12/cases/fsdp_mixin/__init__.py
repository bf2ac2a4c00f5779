# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_state.py
from .mixin import _GradAwareStateMixin
from .state import FSDPState
