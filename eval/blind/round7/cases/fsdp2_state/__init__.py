from ._fsdp_state import FSDPState
from ._fsdp_param_group import FSDPParamGroup
