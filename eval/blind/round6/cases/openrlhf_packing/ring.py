import torch
import torch.distributed as dist

from . import state
from openrlhf.models.ring_attn_utils import convert_ring_attn_params, gather_and_pad_tensor


def maybe_split_for_ring_attn(sequences, attention_mask, packed_seq_lens):
    group = state.PACKING_STATE.ring_attn_group
    if group is not None and state.PACKING_STATE.is_train:
        sequences, attention_mask, position_ids = convert_ring_attn_params(
            sequences, attention_mask, packed_seq_lens, group
        )
        return sequences, attention_mask, position_ids, group
    position_ids = attention_mask.long().cumsum(-1) - 1
    position_ids.masked_fill_(attention_mask == 0, 1)
    return sequences, attention_mask, position_ids, None


def maybe_gather(log_probs, group, pad_len):
    if group is None:
        return log_probs
    world = dist.get_world_size(group)
    return gather_and_pad_tensor(log_probs, group, pad_len * world)
