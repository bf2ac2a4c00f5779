# adapted from allenai/OLMo olmo/model.py
from __future__ import annotations

from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import ModelConfig


class Dropout(nn.Dropout):
    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if self.p == 0.0:
            return input
        else:
            return F.dropout(input, self.p, self.training and torch.is_grad_enabled(), self.inplace)


class LayerNormBase(nn.Module):
    def _cast_if_autocast_enabled(self, tensor: torch.Tensor, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
        if tensor.device.type == "cuda" and torch.is_autocast_enabled():
            return tensor.to(dtype=dtype if dtype is not None else torch.get_autocast_gpu_dtype())
        elif tensor.device.type == "cpu" and torch.is_autocast_cpu_enabled():
            return tensor.to(dtype=dtype if dtype is not None else torch.get_autocast_cpu_dtype())
        else:
            return tensor


class OLMoSequentialBlock(nn.Module):
    def __init__(self, layer_id: int, config: ModelConfig):
        super().__init__()
        self.layer_id = layer_id
        self.config = config
        self._activation_checkpoint_fn = None
        self.dropout = Dropout(config.residual_dropout)

    def forward(self, x: torch.Tensor, attention_bias: Optional[torch.Tensor] = None):
        h = self.attn_norm(x)
        if self._activation_checkpoint_fn is not None and torch.is_grad_enabled():
            att = self._activation_checkpoint_fn(self.attention, h, attention_bias)
        else:
            att = self.attention(h, attention_bias)
        x = x + self.dropout(att)
        return x
