# adapted from Lightning-AI/litgpt litgpt/model.py
import math
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F

from litgpt.config import Config


def do_softcapping(x: torch.Tensor, thresh: float) -> torch.Tensor:
    return torch.tanh(x / thresh) * thresh


class GPT(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        self.config = config
        self.lm_head = nn.Linear(config.n_embd, config.padded_vocab_size, bias=config.lm_head_bias)
        self.mask_cache = None

    def forward(self, idx: torch.Tensor, input_pos=None, lm_head_chunk_size: int = 0):
        T = idx.size(1)
        cos = self.cos[:T].unsqueeze(0)
        sin = self.sin[:T].unsqueeze(0)
        mask = None
        x = self.transformer.wte(idx)
        for block in self.transformer.h:
            x = block(x, cos, sin, mask, input_pos)
        x = self.transformer.ln_f(x)
        clamp_head = (
            partial(do_softcapping, thresh=self.config.final_logit_softcapping)
            if self.config.final_logit_softcapping is not None
            and torch.is_grad_enabled()
            else nn.Identity()
        )
        if lm_head_chunk_size > 0:
            return [clamp_head(self.lm_head(x_i)) for x_i in x.split(lm_head_chunk_size, dim=1)]
        return clamp_head(self.lm_head(x))


class CausalSelfAttention(nn.Module):
    def scaled_dot_product_attention(self, q, k, v, mask=None):
        scale = 1.0 / math.sqrt(self.config.attention_scores_scalar or self.config.head_size)
        if mask is None and not torch.is_grad_enabled():
            # passing `attn_mask` to SDPA disables the flash implementation, which
            # is only worth it for kv-cache generation
            mask = build_mask_cache(q.size(2), q.device)[:, :, : q.size(2), : k.size(2)]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, scale=scale,
                                           is_causal=mask is None)
        return y.transpose(1, 2)
