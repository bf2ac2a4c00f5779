"""Ulysses flash-attention patch (cf. verl/models/transformers/monkey_patch.py::_ulysses_flash_attention_forward)."""
import torch
import torch.distributed as dist
from transformers.modeling_flash_attention_utils import _flash_attention_forward

from verl.utils.ulysses import SeqAllToAll

from .context import get_ulysses_context


_A2A_STREAM = None


def _get_a2a_stream():
    global _A2A_STREAM
    if _A2A_STREAM is None:
        _A2A_STREAM = torch.cuda.Stream()
    return _A2A_STREAM


def _ulysses_flash_attention_forward(query_states, key_states, value_states, *args, position_ids=None, **kwargs):
    """Insert all-to-all before and after flash attention.
    query_states: (batch_size, seqlen/sp_size, nheads, head_dim)
    """
    ctx = get_ulysses_context()
    if ctx is not None and ctx.sp_size > 1:
        group = ctx.group
        if ctx.overlap_qkv_all_to_all and ctx.grad_enabled:
            stream = _get_a2a_stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                key_states = SeqAllToAll.apply(group, key_states, 2, 1)
                value_states = SeqAllToAll.apply(group, value_states, 2, 1)
            query_states = SeqAllToAll.apply(group, query_states, 2, 1)
            torch.cuda.current_stream().wait_stream(stream)
        else:
            query_states = SeqAllToAll.apply(group, query_states, 2, 1)
            key_states = SeqAllToAll.apply(group, key_states, 2, 1)
            value_states = SeqAllToAll.apply(group, value_states, 2, 1)

        if position_ids is not None:
            position_ids_list = [torch.empty_like(position_ids) for _ in range(ctx.sp_size)]
            dist.all_gather(position_ids_list, position_ids, group=group)
            position_ids = torch.concat(position_ids_list, dim=-1)

    attn_output = _flash_attention_forward(query_states, key_states, value_states, *args,
                                           position_ids=position_ids, **kwargs)

    if ctx is not None and ctx.sp_size > 1:
        attn_output = SeqAllToAll.apply(ctx.group, attn_output, 1, 2)
    return attn_output
