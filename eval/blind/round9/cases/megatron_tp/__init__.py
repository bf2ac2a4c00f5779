from .config import LinearCommState, ModelParallelConfig, make_comm_state
from .layers import ColumnParallelLinear, RowParallelLinear

__all__ = [
    "ColumnParallelLinear",
    "LinearCommState",
    "ModelParallelConfig",
    "RowParallelLinear",
    "make_comm_state",
]
