# adapted from volcengine/verl verl/utils/ulysses.py
from . import parallel_state
from .attention import gather_heads_scatter_seq, gather_seq_scatter_heads

__all__ = ["parallel_state", "gather_heads_scatter_seq", "gather_seq_scatter_heads"]
