# adapted from volcengine/verl verl/utils/__init__.py
from .ulysses import (
    gather_heads_scatter_seq,
    gather_seq_scatter_heads,
    get_ulysses_sequence_parallel_world_size,
    set_ulysses_sequence_parallel_group,
)

__all__ = [
    "gather_heads_scatter_seq",
    "gather_seq_scatter_heads",
    "get_ulysses_sequence_parallel_world_size",
    "set_ulysses_sequence_parallel_group",
]
