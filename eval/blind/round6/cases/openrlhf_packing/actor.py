import torch
import torch.nn as nn

from .ring import maybe_gather, maybe_split_for_ring_attn
from .state import PACKING_STATE, record_grad_mode
from openrlhf.models.utils import log_probs_from_logits


class Actor(nn.Module):
    def __init__(self, model, attention_dropout: float = 0.0, aux_loss_coef: float = 0.0):
        super().__init__()
        self.model = model
        self.attention_dropout = attention_dropout
        self.aux_loss_coef = aux_loss_coef
        self.register_forward_pre_hook(record_grad_mode, with_kwargs=True)

    def forward(self, sequences, attention_mask, packed_seq_lens=None, return_output=False):
        sequences, attention_mask, position_ids, group = maybe_split_for_ring_attn(
            sequences, attention_mask, packed_seq_lens
        )
        dropout_p = self.attention_dropout if PACKING_STATE.is_train else 0.0
        output = self.model(
            sequences, attention_mask=attention_mask, position_ids=position_ids, attention_dropout=dropout_p
        )
        output["logits"] = output["logits"].to(torch.float32)
        log_probs = log_probs_from_logits(output["logits"][:, :-1, :], sequences[:, 1:])
        log_probs = maybe_gather(log_probs, group, pad_len=sequences.size(1))
        if PACKING_STATE.is_train and self.aux_loss_coef > 0 and "aux_loss" in output:
            output["scaled_aux_loss"] = output["aux_loss"] * self.aux_loss_coef
        return (log_probs, output) if return_output else log_probs
