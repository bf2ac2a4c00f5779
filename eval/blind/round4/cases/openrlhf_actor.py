# Modeled on OpenRLHF openrlhf/models/actor.py (Actor.forward with ring attention)
# and openrlhf/models/utils.py (log_probs_from_logits).
from typing import Optional

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

try:
    from flash_attn.ops.triton.cross_entropy import cross_entropy_loss
    _HAS_TRITON_CE = True
except ImportError:
    cross_entropy_loss = None
    _HAS_TRITON_CE = False


def log_probs_from_logits(logits: torch.Tensor, labels: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    if temperature != 1.0:
        logits = logits / temperature
    try:
        grad_on = torch._C.is_grad_enabled()
    except AttributeError:
        grad_on = True
    if logits.dtype in [torch.float32, torch.float64] and _HAS_TRITON_CE and grad_on:
        batch_dim = logits.shape[:-1]
        last_dim = logits.shape[-1]
        output = cross_entropy_loss(logits.reshape(-1, last_dim), labels.reshape(-1))
        log_probs_labels = -output[0].view(*batch_dim)
    else:
        log_probs_labels = []
        for row_logits, row_labels in zip(logits, labels):
            row_log_probs = F.log_softmax(row_logits, dim=-1)
            log_probs_labels.append(row_log_probs.gather(dim=-1, index=row_labels.unsqueeze(-1)).squeeze(-1))
        log_probs_labels = torch.stack(log_probs_labels)
    return log_probs_labels


def gather_and_pad_tensor(tensor, ring_attn_group, ring_attn_pad_len):
    world = dist.get_world_size(ring_attn_group)
    out = [torch.empty_like(tensor) for _ in range(world)]
    dist.all_gather(out, tensor, group=ring_attn_group)
    full = torch.cat(out, dim=1)
    return full[:, : full.size(1) - ring_attn_pad_len] if ring_attn_pad_len else full


class Actor(nn.Module):
    def __init__(self, model, temperature: float = 1.0, packing_samples: bool = False):
        super().__init__()
        self.model = model
        self.temperature = temperature
        self.packing_samples = packing_samples

    def forward(
        self,
        sequences: torch.LongTensor,
        action_mask: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        ring_attn_group: Optional[dist.ProcessGroup] = None,
        ring_attn_pad_len: int = 0,
    ) -> torch.Tensor:
        position_ids = attention_mask.long().cumsum(-1) - 1
        position_ids.masked_fill_(attention_mask == 0, 1)
        output = self.model(sequences, attention_mask=attention_mask, position_ids=position_ids)
        output["logits"] = output["logits"].to(torch.float32)
        rolled_sequences = torch.roll(sequences, shifts=-1, dims=1)
        log_probs = log_probs_from_logits(output["logits"], rolled_sequences, temperature=self.temperature)
        if ring_attn_group is not None and torch.is_grad_enabled():
            log_probs = gather_and_pad_tensor(log_probs, ring_attn_group, ring_attn_pad_len)
        action_log_probs = log_probs[:, :-1]
        if action_mask is not None:
            action_log_probs = action_log_probs[:, -action_mask.shape[1]:] * action_mask.float()
        return action_log_probs
