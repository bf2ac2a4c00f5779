# Modelled on verl verl/models/transformers/monkey_patch.py (_ulysses_flash_attention_forward)
import torch
from transformers.modeling_flash_attention_utils import _flash_attention_forward

from .comm import (
    gather_heads_scatter_seq,
    gather_outputs_and_unpad,
    gather_seq_scatter_heads_qkv,
    get_ulysses_sequence_parallel_group,
)


class UlyssesAttention(torch.nn.Module):
    def __init__(self, config, overlap_comm: bool = False):
        super().__init__()
        self.config = config
        self.overlap_comm = overlap_comm

    def forward(self, query_states, key_states, value_states, attention_mask=None, position_ids=None,
                pad_size: int = 0, **kwargs):
        grad_enabled = torch.is_grad_enabled()
        sp_kwargs = {"group": get_ulysses_sequence_parallel_group(), "overlap": self.overlap_comm,
                     "grad_enabled": grad_enabled}

        # (bsz, seq_len/n, n_head, head_dim) -> (bsz, seq_len, n_head/n, head_dim)
        q, k, v = gather_seq_scatter_heads_qkv(query_states, key_states, value_states, seq_dim=1, head_dim=2,
                                               **sp_kwargs)

        attn_output = _flash_attention_forward(q, k, v, attention_mask, query_length=q.size(1),
                                               position_ids=position_ids, **kwargs)
        # (bsz, seq_len, n_head/n, head_dim) -> (bsz, seq_len/n, n_head, head_dim)
        return gather_heads_scatter_seq(attn_output, head_dim=2, seq_dim=1, group=sp_kwargs["group"])

    def gather_logits(self, logits, pad_size: int):
        return gather_outputs_and_unpad(logits, gather_dim=0, unpad_dim=0, padding_size=pad_size,
                                        grad_enabled=torch.is_grad_enabled())
