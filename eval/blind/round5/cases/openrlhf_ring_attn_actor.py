"""Modelled on OpenRLHF openrlhf/models/actor.py (Actor.forward) and
openrlhf/models/ring_attn_utils.py (convert_ring_attn_params / update_ring_attn_params)."""
from typing import Optional

import torch
import torch.distributed as dist
import torch.nn as nn

from openrlhf.models.ring_attn_utils import gather_and_pad_tensor, unpad_and_slice_tensor
from openrlhf.models.utils import log_probs_from_logits


class Actor(nn.Module):
    def __init__(self, model, packing_samples: bool = False, temperature: float = 1.0):
        super().__init__()
        self.model = model
        self.packing_samples = packing_samples
        self.temperature = temperature

    def forward(
        self,
        sequences: torch.LongTensor,
        action_mask: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        ring_attn_group: Optional[dist.ProcessGroup] = None,
        return_output: bool = False,
    ) -> torch.Tensor:
        batch, seqlen = sequences.size()
        forward_attention_mask = attention_mask
        # ring attention only pays off for the long training sequences
        use_ring = all([
            self.packing_samples,
            ring_attn_group is not None,
            torch.is_grad_enabled(),
        ])
        if use_ring:
            sequences, position_ids, rolled_sequences, ring_attn_pad_len, indices = unpad_and_slice_tensor(
                sequences, attention_mask, ring_attn_group
            )
        else:
            position_ids = attention_mask.long().cumsum(-1) - 1
            position_ids.masked_fill_(attention_mask == 0, 1)
            rolled_sequences = torch.roll(sequences, shifts=-1, dims=1)

        output = self.model(sequences, attention_mask=forward_attention_mask, position_ids=position_ids)
        output["logits"] = output["logits"].to(torch.float32)
        log_probs = log_probs_from_logits(output["logits"], rolled_sequences, temperature=self.temperature)

        if use_ring:
            log_probs = gather_and_pad_tensor(log_probs, ring_attn_group, ring_attn_pad_len, indices, batch, seqlen)
        log_probs = log_probs[:, :-1]
        action_log_probs = log_probs[:, -action_mask.shape[1]:] if action_mask is not None else log_probs
        if return_output:
            return (action_log_probs, output)
        return action_log_probs
