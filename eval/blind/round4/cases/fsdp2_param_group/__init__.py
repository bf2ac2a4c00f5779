# Modeled on torch/distributed/_composable/fsdp/_fsdp_state.py (FSDPState._pre_forward/_post_forward,
# _register_pre_backward_hook) and _fsdp_param_group.py (FSDPParamGroup.pre_forward/post_forward,
# unshard(async_op), _prefetch_unshard, _register_post_backward_hook, reshard).
from ._fsdp_param_group import FSDPParamGroup
from ._fsdp_state import FSDPState
