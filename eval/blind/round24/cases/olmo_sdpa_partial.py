# adapted from allenai/OLMo olmo/model.py
from __future__ import annotations

from functools import partial
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


class OLMoBlock(nn.Module):
    def _scaled_dot_product_attention(self, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal)

    def attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attention_bias: Optional[torch.Tensor] = None):
        B, T, C = q.size()
        dtype = k.dtype
        if self.q_norm is not None and self.k_norm is not None:
            q = self.q_norm(q).to(dtype=dtype)
            k = self.k_norm(k).to(dtype=dtype)
        q = q.view(B, T, self.config.n_heads, C // self.config.n_heads).transpose(1, 2)
        k = k.view(B, T, self.config.n_heads, C // self.config.n_heads).transpose(1, 2)
        v = v.view(B, T, self.config.n_heads, C // self.config.n_heads).transpose(1, 2)
        if self.config.rope:
            q, k = self.rotary_emb(q, k)

        sdpa = partial(
            self._scaled_dot_product_attention,
            dropout_p=self.config.attention_dropout if torch.is_grad_enabled() else 0.0,
            is_causal=attention_bias is None,
        )
        att = sdpa(q, k, v, attn_mask=attention_bias)
        att = att.transpose(1, 2).contiguous().view(B, T, C)
        if self.training:
            att = self.dropout(att)
        return self.attn_out(att)
