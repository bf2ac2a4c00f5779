from typing import Optional, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import AutoModelForCausalLM


def log_probs_from_logits(logits: torch.Tensor, labels: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    if temperature != 1.0:
        logits = logits.div(temperature)
    if logits.dtype in [torch.float32, torch.float64]:
        logits_labels = torch.gather(logits, dim=-1, index=labels.unsqueeze(-1)).squeeze(-1)
        logsumexp_values = torch.logsumexp(logits, dim=-1)
        return logits_labels - logsumexp_values
    log_probs_labels = []
    for row_logits, row_labels in zip(logits, labels):
        row_log_probs = F.log_softmax(row_logits, dim=-1)
        log_probs_labels.append(row_log_probs.gather(dim=-1, index=row_labels.unsqueeze(-1)).squeeze(-1))
    return torch.stack(log_probs_labels)


class Actor(nn.Module):
    def __init__(self, pretrain_or_model, use_flash_attention_2=False, bf16=True,
                 packing_samples=False, temperature=1.0, **kwargs) -> None:
        super().__init__()
        self.temperature = temperature
        self.packing_samples = packing_samples
        if isinstance(pretrain_or_model, str):
            attn_implementation = "flash_attention_2" if use_flash_attention_2 else "eager"
            self.model = AutoModelForCausalLM.from_pretrained(
                pretrain_or_model,
                trust_remote_code=True,
                attn_implementation=attn_implementation,
                torch_dtype=torch.bfloat16 if bf16 else "auto",
            )
        else:
            self.model = pretrain_or_model

    def forward(
        self,
        sequences: torch.LongTensor,
        action_mask: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        return_output: bool = False,
    ) -> Union[torch.Tensor, dict]:
        if not self.packing_samples:
            position_ids = attention_mask.long().cumsum(-1) - 1
            position_ids.masked_fill_(attention_mask == 0, 1)
        else:
            position_ids = None

        output = self.model(sequences, attention_mask=attention_mask, position_ids=position_ids)
        logits = output["logits"]
        if not torch.is_grad_enabled():
            logits = logits.to(self.model.dtype)
        else:
            logits = logits.to(torch.float32)
        output["logits"] = logits

        if action_mask is None and return_output:
            return output

        log_probs = log_probs_from_logits(
            logits[:, :-1, :], sequences[:, 1:], temperature=self.temperature
        )
        if action_mask is None:
            return log_probs
        action_log_probs = log_probs[:, -action_mask.shape[1]:]
        if return_output:
            return (action_log_probs, output)
        return action_log_probs

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs={"use_reentrant": False}):
        self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=gradient_checkpointing_kwargs)

    def gradient_checkpointing_disable(self):
        self.model.gradient_checkpointing_disable()
