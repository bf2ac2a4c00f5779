import math
from functools import partial

import torch
import torch.nn as nn
from einops import rearrange

from flash_attn import flash_attn_qkvpacked_func, flash_attn_varlen_qkvpacked_func
from flash_attn.layers.rotary import RotaryEmbedding


class FlashSelfAttention(nn.Module):
    def __init__(self, causal=False, softmax_scale=None, attention_dropout=0.0,
                 window_size=(-1, -1), deterministic=False):
        super().__init__()
        self.causal = causal
        self.softmax_scale = softmax_scale
        self.drop = nn.Dropout(attention_dropout)
        self.window_size = window_size
        self.deterministic = deterministic

    @property
    def dropout_p(self) -> float:
        return self.drop.p if torch.is_grad_enabled() else 0.0

    def forward(self, qkv, causal=None, cu_seqlens=None, max_seqlen=None):
        assert qkv.dtype in [torch.float16, torch.bfloat16]
        causal = self.causal if causal is None else causal
        if cu_seqlens is not None:
            return flash_attn_varlen_qkvpacked_func(
                qkv, cu_seqlens, max_seqlen, self.dropout_p,
                softmax_scale=self.softmax_scale, causal=causal,
                window_size=self.window_size, deterministic=self.deterministic,
            )
        return flash_attn_qkvpacked_func(
            qkv, self.dropout_p, softmax_scale=self.softmax_scale, causal=causal,
            window_size=self.window_size, deterministic=self.deterministic,
        )


class MHA(nn.Module):
    def __init__(self, embed_dim, num_heads, qkv_proj_bias=True, out_proj_bias=True,
                 dropout=0.0, softmax_scale=None, causal=False, rotary_emb_dim=0,
                 checkpointing=False, device=None, dtype=None) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.embed_dim = embed_dim
        self.causal = causal
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.checkpointing = checkpointing
        self.rotary_emb_dim = rotary_emb_dim
        if rotary_emb_dim > 0:
            self.rotary_emb = RotaryEmbedding(rotary_emb_dim, device=device)
        self.Wqkv = nn.Linear(embed_dim, 3 * embed_dim, bias=qkv_proj_bias, **factory_kwargs)
        self.inner_attn = FlashSelfAttention(
            causal=causal, softmax_scale=softmax_scale, attention_dropout=dropout
        )
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=out_proj_bias, **factory_kwargs)

    def forward(self, x, cu_seqlens=None, max_seqlen=None, seqlen_offset=0):
        qkv = self.Wqkv(x)
        qkv = rearrange(qkv, "... (three h d) -> ... three h d", three=3, d=self.head_dim)
        if self.rotary_emb_dim > 0:
            qkv = self.rotary_emb(qkv, seqlen_offset=seqlen_offset, max_seqlen=max_seqlen)
        kwargs = {} if cu_seqlens is None else {"cu_seqlens": cu_seqlens, "max_seqlen": max_seqlen}
        if self.checkpointing and torch.is_grad_enabled():
            context = torch.utils.checkpoint.checkpoint(
                self.inner_attn, qkv, use_reentrant=False, **kwargs
            )
        else:
            context = self.inner_attn(qkv, **kwargs)
        out = self.out_proj(rearrange(context, "... h d -> ... (h d)"))
        return out
