# adapted from volcengine/verl verl/utils/ulysses.py
import torch

from .all_to_all import gather_heads_scatter_seq, gather_seq_scatter_heads
from .parallel_state import ulysses_forward_scope


def ulysses_attention_forward(attn_fn, o_proj, query_states, key_states, value_states, **kwargs):
    """[bsz, seq/n, h, d] -> all-to-all -> attention -> all-to-all -> [bsz, seq/n, h*d]"""
    with ulysses_forward_scope():
        query_states = gather_seq_scatter_heads(query_states, seq_dim=1, head_dim=2)
        key_states = gather_seq_scatter_heads(key_states, seq_dim=1, head_dim=2)
        value_states = gather_seq_scatter_heads(value_states, seq_dim=1, head_dim=2)
        attn_output = attn_fn(query_states, key_states, value_states, **kwargs)
        attn_output = gather_heads_scatter_seq(attn_output, seq_dim=1, head_dim=2)
        if callable(attn_output):
            attn_output = attn_output()
        bsz, seqlen = attn_output.shape[:2]
        return o_proj(attn_output.reshape(bsz, seqlen, -1))
