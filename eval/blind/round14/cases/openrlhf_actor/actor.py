# adapted from OpenRLHF/OpenRLHF openrlhf/models/actor.py
from typing import Optional

import torch
import torch.nn as nn
from transformers import AutoModelForCausalLM

from .ring_attn_utils import (
    clear_hacked_position_ids,
    gather_and_pad_tensor,
    get_ring_attn_group,
    set_hacked_position_ids,
    unpad_and_slice_tensor,
)
from .utils import log_probs_from_logits


class Actor(nn.Module):
    """
    Base class for Actor models in reinforcement learning.
    """

    def __init__(self, pretrain_or_model, use_flash_attention_2=False, bf16=True, packing_samples=False,
                 temperature=1.0, **kwargs) -> None:
        super().__init__()
        self.temperature = temperature
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
        self.packing_samples = packing_samples

    def forward(
        self,
        sequences: torch.LongTensor,
        action_mask: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        return_output=False,
    ) -> torch.Tensor:
        """Returns action log probs"""
        batch, seqlen = sequences.size()
        infer_pass = not torch.is_grad_enabled()
        ring_attn_group = get_ring_attn_group(infer_pass)
        if not self.packing_samples:
            # https://github.com/OpenRLHF/OpenRLHF/issues/217
            position_ids = attention_mask.long().cumsum(-1) - 1
            position_ids.masked_fill_(attention_mask == 0, 1)
            output = self.model(sequences, attention_mask=attention_mask, position_ids=position_ids)
            rolled_sequences = torch.roll(sequences, shifts=-1, dims=1)
            ring_attn_pad_len, indices = 0, None
        else:
            sequences, position_ids, rolled_sequences, ring_attn_pad_len, indices = unpad_and_slice_tensor(
                sequences, attention_mask, ring_attn_group
            )
            set_hacked_position_ids(position_ids)
            output = self.model(sequences, attention_mask=None, position_ids=position_ids)
            clear_hacked_position_ids()

        output["logits"] = output["logits"].to(torch.float32)
        log_probs = log_probs_from_logits(output["logits"], rolled_sequences, temperature=self.temperature)

        if self.packing_samples:
            log_probs = gather_and_pad_tensor(log_probs, ring_attn_group, ring_attn_pad_len, indices, batch, seqlen)

        log_probs = log_probs[:, :-1]
        if action_mask is None:
            return output if return_output else log_probs
        action_log_probs = log_probs[:, -action_mask.shape[1]:] * action_mask.float()
        if return_output:
            return (action_log_probs, output)
        return action_log_probs

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs={"use_reentrant": False}):
        self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=gradient_checkpointing_kwargs)

    def gradient_checkpointing_disable(self):
        self.model.gradient_checkpointing_disable()
