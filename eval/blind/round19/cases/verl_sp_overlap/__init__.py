# adapted from volcengine/verl verl/utils/ulysses.py
from .parallel_state import (
    set_ulysses_sequence_parallel_group,
    get_ulysses_sequence_parallel_group,
    ulysses_forward_scope,
    get_ulysses_overlap,
)
from .all_to_all import gather_seq_scatter_heads, gather_heads_scatter_seq
from .attention import ulysses_attention_forward

__all__ = [
    "set_ulysses_sequence_parallel_group",
    "get_ulysses_sequence_parallel_group",
    "ulysses_forward_scope",
    "get_ulysses_overlap",
    "gather_seq_scatter_heads",
    "gather_heads_scatter_seq",
    "ulysses_attention_forward",
]
