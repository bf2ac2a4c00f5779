# Package adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/{_fsdp_state.py,_fsdp_param_group.py}
from .context import ForwardContext, build_context
from .runtime import pre_forward
