# Adapted from OpenRLHF/OpenRLHF openrlhf/models/actor.py (Actor.forward, packed samples + ring attention).
from typing import Optional

import torch
import torch.nn as nn

from openrlhf.models.ring_attn_utils import convert_ring_attn_params, gather_and_pad_tensor
from openrlhf.models.utils import log_probs_from_logits


class Actor(nn.Module):
    def forward(
        self,
        sequences: torch.LongTensor,
        num_actions: Optional[int] = None,
        attention_mask: Optional[torch.Tensor] = None,
        return_output=False,
        ring_attn_group=None,
        packed_seq_lens=None,
    ) -> torch.Tensor:
        fwd_state = {"grad": torch.is_grad_enabled(), "packing": self.packing_samples}
        if not fwd_state["packing"]:
            position_ids = attention_mask.long().cumsum(-1) - 1
            position_ids.masked_fill_(attention_mask == 0, 1)
        else:
            if ring_attn_group is not None and fwd_state.get("grad", False):
                sequences, attention_mask, position_ids = convert_ring_attn_params(
                    sequences, attention_mask, packed_seq_lens, ring_attn_group
                )
            else:
                position_ids = attention_mask.long().cumsum(-1) - 1
                position_ids.masked_fill_(attention_mask == 0, 1)
            attention_mask = None

        output = self.model(sequences, attention_mask=attention_mask, position_ids=position_ids)
        output["logits"] = output["logits"].to(torch.float32)
        log_probs = log_probs_from_logits(output["logits"][:, :-1, :], sequences[:, 1:])

        if ring_attn_group is not None and fwd_state["packing"]:
            log_probs = gather_and_pad_tensor(log_probs, ring_attn_group, packed_seq_lens)

        if return_output:
            return output if num_actions is None else (log_probs[:, -num_actions:], output)
        return log_probs[:, -num_actions:]
