"""Logits computation from hidden states for tensor-parallel vocab heads."""
import warnings
from typing import Optional

import torch
import torch.nn as nn

from vllm.distributed import (
    get_tensor_model_parallel_world_size,
    tensor_model_parallel_all_gather,
    tensor_model_parallel_gather,
)
from vllm.platforms import current_platform


class LogitsProcessor(nn.Module):
    def __init__(
        self,
        vocab_size: int,
        org_vocab_size: Optional[int] = None,
        scale: float = 1.0,
        logits_as_input: bool = False,
        soft_cap: Optional[float] = None,
    ) -> None:
        super().__init__()
        self.scale = scale
        self.vocab_size = vocab_size
        self.logits_as_input = logits_as_input
        self.org_vocab_size = org_vocab_size or vocab_size
        self.soft_cap = soft_cap
        self.use_all_gather = current_platform.use_all_gather()

    def forward(self, lm_head, hidden_states: torch.Tensor, embedding_bias=None):
        if not torch.is_inference_mode_enabled():
            warnings.warn("LogitsProcessor called outside inference mode", stacklevel=2)
        if self.logits_as_input:
            logits = hidden_states
        else:
            logits = self._get_logits(hidden_states, lm_head, embedding_bias)
        if logits is None:
            return None
        if self.soft_cap is not None:
            logits = logits / self.soft_cap
            logits = torch.tanh(logits)
            logits = logits * self.soft_cap
        if self.scale != 1.0:
            logits *= self.scale
        return logits

    def _gather_logits(self, logits: torch.Tensor) -> torch.Tensor:
        if get_tensor_model_parallel_world_size() == 1:
            return logits
        gather_everywhere = self.use_all_gather or torch.is_inference_mode_enabled()
        if gather_everywhere:
            logits = tensor_model_parallel_all_gather(logits)
        else:
            logits = tensor_model_parallel_gather(logits)
        return logits

    def _get_logits(self, hidden_states, lm_head, embedding_bias):
        logits = lm_head.quant_method.apply(lm_head, hidden_states, bias=embedding_bias)
        logits = self._gather_logits(logits)
        if logits is not None:
            logits = logits[..., : self.org_vocab_size]
        return logits
