# adapted from volcengine/verl verl/utils/ulysses.py
from ._sp_config import SPCommConfig, current_comm_config
from .ulysses import gather_seq_scatter_heads

__all__ = ["SPCommConfig", "current_comm_config", "gather_seq_scatter_heads"]
