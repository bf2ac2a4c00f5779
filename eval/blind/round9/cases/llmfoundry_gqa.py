import functools
import math
from typing import Optional

import torch
import torch.nn as nn
from einops import rearrange

from flash_attn import flash_attn_varlen_func


def repeat_kv_for_gqa(hidden: torch.Tensor, n_rep: int) -> torch.Tensor:
    if n_rep == 1:
        return hidden
    b, s, kv_n_heads, d = hidden.shape
    hidden = hidden[:, :, :, None, :].expand(b, s, kv_n_heads, n_rep, d)
    return hidden.reshape(b, s, kv_n_heads * n_rep, d)


def flash_attn_fn(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    n_heads: int,
    kv_n_heads: int,
    softmax_scale: Optional[float] = None,
    dropout_p: float = 0.0,
    training: bool = False,
    is_causal: bool = False,
    flash_attn_padding_info: Optional[dict] = None,
    should_repeat_kv_for_gqa: Optional[bool] = True,
    sliding_window_size: int = -1,
):
    batch_size, seqlen = query.shape[:2]
    indices_q = flash_attn_padding_info["indices_q"]
    indices_k = flash_attn_padding_info["indices_k"]
    indices_v = flash_attn_padding_info["indices_v"]
    cu_seqlens_q = flash_attn_padding_info["cu_seqlens_q"]
    cu_seqlens_k = flash_attn_padding_info["cu_seqlens_k"]
    max_seqlen_q = flash_attn_padding_info["max_seqlen_q"]
    max_seqlen_k = flash_attn_padding_info["max_seqlen_k"]

    query_unpad = query.view(-1, n_heads, query.size(-1) // n_heads).index_select(0, indices_q)
    key_unpad = key.view(-1, kv_n_heads, key.size(-1) // kv_n_heads).index_select(0, indices_k)
    value_unpad = value.view(-1, kv_n_heads, value.size(-1) // kv_n_heads).index_select(0, indices_v)

    if should_repeat_kv_for_gqa and kv_n_heads < n_heads:
        n_rep = n_heads // kv_n_heads
        key_unpad = key_unpad.repeat_interleave(n_rep, dim=1)
        value_unpad = value_unpad.repeat_interleave(n_rep, dim=1)

    dropout_p = dropout_p if training else 0.0
    output_unpad = flash_attn_varlen_func(
        q=query_unpad, k=key_unpad, v=value_unpad,
        cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
        max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
        dropout_p=dropout_p, softmax_scale=softmax_scale, causal=is_causal,
        window_size=(sliding_window_size, sliding_window_size),
    )
    output = torch.zeros(batch_size * seqlen, n_heads, output_unpad.size(-1),
                         dtype=output_unpad.dtype, device=output_unpad.device)
    output.index_copy_(0, indices_q, output_unpad)
    return rearrange(output, "(b s) h d -> b s (h d)", b=batch_size), None, None


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, kv_n_heads: int, attn_pdrop: float = 0.0,
                 softmax_scale: Optional[float] = None, sliding_window_size: int = -1,
                 device: Optional[str] = None):
        super().__init__()
        self.d_model = d_model
        self.n_heads = n_heads
        self.kv_n_heads = kv_n_heads
        self.head_dim = d_model // n_heads
        self.softmax_scale = softmax_scale or 1 / math.sqrt(self.head_dim)
        self.attn_dropout_p = attn_pdrop
        self.sliding_window_size = sliding_window_size
        self.Wqkv = nn.Linear(d_model, d_model + 2 * kv_n_heads * self.head_dim, device=device)
        self.out_proj = nn.Linear(d_model, d_model, device=device)

    def _attn_fn(self):
        return functools.partial(
            flash_attn_fn,
            n_heads=self.n_heads,
            kv_n_heads=self.kv_n_heads,
            softmax_scale=self.softmax_scale,
            dropout_p=self.attn_dropout_p,
            training=torch.is_grad_enabled(),
            sliding_window_size=self.sliding_window_size,
        )

    def forward(self, x: torch.Tensor, is_causal: bool = True, flash_attn_padding_info=None):
        qkv = self.Wqkv(x)
        query, key, value = qkv.split(
            [self.d_model, self.kv_n_heads * self.head_dim, self.kv_n_heads * self.head_dim], dim=2
        )
        context, attn_weights, _ = self._attn_fn()(
            query, key, value, is_causal=is_causal, flash_attn_padding_info=flash_attn_padding_info
        )
        return self.out_proj(context), attn_weights
