# adapted from OpenRLHF/OpenRLHF openrlhf/models/utils.py
import functools
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


def _capture_grad(fn):
    """Record the caller's autograd mode so the helper can pick a code path."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, _grad=torch.is_grad_enabled(), **kwargs)

    return wrapper


def _logsumexp_by_chunk(logits: torch.Tensor, chunk_size: int = 1024) -> torch.Tensor:
    seq_len = logits.shape[0]
    logsumexp_values = torch.zeros((seq_len), device=logits.device, dtype=logits.dtype)
    for s_idx in range(0, seq_len, chunk_size):
        end_idx = min(s_idx + chunk_size, seq_len)
        logsumexp_values[s_idx:end_idx] = torch.logsumexp(logits[s_idx:end_idx], dim=-1)
    return logsumexp_values


@_capture_grad
def log_probs_from_logits(logits: torch.Tensor, labels: torch.Tensor, temperature: float = 1.0, _grad: bool = True):
    if temperature != 1.0:
        logits.div_(temperature)
    if logits.dtype in [torch.float32, torch.float64]:
        batch_dim = logits.shape[:-1]
        last_dim = logits.shape[-1]
        if _grad:
            try:
                from flash_attn.ops.triton.cross_entropy import cross_entropy_loss

                output = cross_entropy_loss(logits.reshape(-1, last_dim), labels.reshape(-1))
                return -output[0].view(*batch_dim)
            except ImportError:
                pass
        logits_labels = torch.gather(logits, dim=-1, index=labels.unsqueeze(-1)).squeeze(-1)
        logsumexp_values = _logsumexp_by_chunk(logits.reshape(-1, last_dim)).view(*batch_dim)
        return logits_labels - logsumexp_values
    log_probs_labels = []
    for row_logits, row_labels in zip(logits, labels):  # loop to reduce peak mem consumption
        row_log_probs = F.log_softmax(row_logits, dim=-1)
        log_probs_labels.append(row_log_probs.gather(dim=-1, index=row_labels.unsqueeze(-1)).squeeze(-1))
    return torch.stack(log_probs_labels)


class Actor(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.aux_loss = None

    def forward(self, sequences: torch.LongTensor, num_actions: int = None,
                attention_mask: Optional[torch.Tensor] = None, return_output=False) -> torch.Tensor:
        """Returns action log probs"""
        position_ids = attention_mask.long().cumsum(-1) - 1
        position_ids.masked_fill_(attention_mask == 0, 1)
        output = self.model(sequences, attention_mask=attention_mask, position_ids=position_ids)
        # MoE balancing loss only matters for the policy update step
        if torch.is_grad_enabled() and "aux_loss" in output:
            self.aux_loss = output["aux_loss"]
        log_probs = log_probs_from_logits(output["logits"][:, :-1, :], sequences[:, 1:])
        if return_output:
            return output if num_actions is None else (log_probs[:, -num_actions:], output)
        return log_probs[:, -num_actions:]
