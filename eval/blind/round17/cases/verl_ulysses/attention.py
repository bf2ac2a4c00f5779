# adapted from volcengine/verl verl/models/transformers/monkey_patch.py
from typing import Optional

import torch
import torch.distributed as dist
from torch import is_grad_enabled as _grad_enabled

from transformers.modeling_flash_attention_utils import _flash_attention_forward

from .ulysses import (
    gather_heads_scatter_seq,
    gather_seq_scatter_heads,
    get_ulysses_sequence_parallel_group,
    get_ulysses_sequence_parallel_world_size,
)


def _ulysses_flash_attention_forward(
    query_states: torch.Tensor,
    key_states: torch.Tensor,
    value_states: torch.Tensor,
    *args,
    position_ids: Optional[torch.Tensor] = None,
    **kwargs,
):
    ulysses_sp_size = get_ulysses_sequence_parallel_world_size()

    ########## AlltoAll for Ulysses ##########
    if ulysses_sp_size > 1:
        overlap = _grad_enabled()
        # (bsz, seq_len/n, n_head, head_dim) -> (bsz, seq_len, n_head/n, head_dim)
        query_states = gather_seq_scatter_heads(query_states, seq_dim=1, head_dim=2, async_op=overlap)
        key_states = gather_seq_scatter_heads(key_states, seq_dim=1, head_dim=2, async_op=overlap)
        value_states = gather_seq_scatter_heads(value_states, seq_dim=1, head_dim=2, async_op=overlap)

        # TODO: all_gather position_ids because `prepare_fa2_from_position_ids` needs it, we can eliminate
        # this all_gather by passing cu_seq_lens_q, cu_seq_lens_k, max_length_k, max_length_q explicitly.
        with torch.no_grad():
            position_ids_list = [torch.empty_like(position_ids) for _ in range(ulysses_sp_size)]
            dist.all_gather(position_ids_list, position_ids, group=get_ulysses_sequence_parallel_group())
            position_ids = torch.concat(position_ids_list, dim=-1)

    attn_output = _flash_attention_forward(query_states, key_states, value_states, *args,
                                           position_ids=position_ids, **kwargs)

    ########## AlltoAll for Ulysses ##########
    if ulysses_sp_size > 1:
        # (bsz, seq_len, n_head/n, head_dim) -> (bsz, seq_len/n, n_head, head_dim)
        attn_output = gather_heads_scatter_seq(attn_output, seq_dim=1, head_dim=2)

    return attn_output
