# adapted from Dao-AILab/flash-attention flash_attn/modules/mha.py
import math
from functools import partial

import torch
import torch.nn as nn
from einops import rearrange, repeat

try:
    from flash_attn import (
        flash_attn_kvpacked_func,
        flash_attn_qkvpacked_func,
        flash_attn_varlen_kvpacked_func,
        flash_attn_varlen_qkvpacked_func,
    )
except ImportError:
    flash_attn_varlen_qkvpacked_func, flash_attn_varlen_kvpacked_func = None, None
    flash_attn_qkvpacked_func, flash_attn_kvpacked_func = None, None

try:
    from flash_attn.ops.fused_dense import FusedDense
except ImportError:
    FusedDense = None


class FlashSelfAttention(nn.Module):
    """Implement the scaled dot product attention with softmax."""

    def __init__(self, causal=False, softmax_scale=None, attention_dropout=0.0):
        super().__init__()
        assert flash_attn_varlen_qkvpacked_func is not None, "FlashAttention is not installed"
        assert flash_attn_qkvpacked_func is not None, "FlashAttention is not installed"
        self.causal = causal
        self.softmax_scale = softmax_scale
        self.drop = nn.Dropout(attention_dropout)

    def forward(self, qkv, causal=None, cu_seqlens=None, max_seqlen=None):
        assert qkv.dtype in [torch.float16, torch.bfloat16]
        assert qkv.is_cuda
        causal = self.causal if causal is None else causal
        unpadded = cu_seqlens is not None
        dropout_p = self.drop.p if self.training else 0.0
        if unpadded:
            assert cu_seqlens.dtype == torch.int32
            assert max_seqlen is not None
            assert isinstance(max_seqlen, int)
            return flash_attn_varlen_qkvpacked_func(
                qkv, cu_seqlens, max_seqlen, dropout_p,
                softmax_scale=self.softmax_scale, causal=causal,
            )
        else:
            return flash_attn_qkvpacked_func(
                qkv, dropout_p, softmax_scale=self.softmax_scale, causal=causal,
            )


class FlashCrossAttention(nn.Module):
    """Implement the scaled dot product attention with softmax."""

    def __init__(self, causal=False, softmax_scale=None, attention_dropout=0.0):
        super().__init__()
        assert flash_attn_varlen_kvpacked_func is not None, "FlashAttention is not installed"
        assert flash_attn_kvpacked_func is not None, "FlashAttention is not installed"
        self.causal = causal
        self.softmax_scale = softmax_scale
        self.drop = nn.Dropout(attention_dropout)

    def forward(
        self,
        q,
        kv,
        causal=None,
        cu_seqlens=None,
        max_seqlen=None,
        cu_seqlens_k=None,
        max_seqlen_k=None,
    ):
        assert q.dtype in [torch.float16, torch.bfloat16]
        assert q.is_cuda and kv.is_cuda
        causal = self.causal if causal is None else causal
        unpadded = cu_seqlens is not None
        # cross-attention is only dropped out while optimizing the decoder
        dropout_p = self.drop.p if torch.is_grad_enabled() else 0.0
        if unpadded:
            assert cu_seqlens.dtype == torch.int32
            assert max_seqlen is not None
            assert cu_seqlens_k is not None
            assert max_seqlen_k is not None
            return flash_attn_varlen_kvpacked_func(
                q, kv, cu_seqlens, cu_seqlens_k, max_seqlen, max_seqlen_k, dropout_p,
                softmax_scale=self.softmax_scale, causal=causal,
            )
        else:
            batch_size, seqlen_q = q.shape[0], q.shape[1]
            assert kv.shape[0] == batch_size and kv.shape[4] == q.shape[3]
            return flash_attn_kvpacked_func(
                q, kv, dropout_p, causal=causal, softmax_scale=self.softmax_scale,
            )


class MHA(nn.Module):
    """Multi-head self-attention and cross-attention"""

    def __init__(
        self,
        embed_dim,
        num_heads,
        cross_attn=False,
        qkv_proj_bias=True,
        out_proj_bias=True,
        dropout=0.0,
        softmax_scale=None,
        causal=False,
        layer_idx=None,
        fused_bias_fc=False,
        use_flash_attn=False,
        checkpointing=False,
        device=None,
        dtype=None,
    ) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.embed_dim = embed_dim
        self.cross_attn = cross_attn
        self.causal = causal
        self.layer_idx = layer_idx
        self.use_flash_attn = use_flash_attn
        self.checkpointing = checkpointing
        self.num_heads = num_heads
        assert self.embed_dim % num_heads == 0, "embed_dim must be divisible by num_heads"
        self.head_dim = self.embed_dim // num_heads
        linear_cls = nn.Linear if not fused_bias_fc else FusedDense
        if not self.cross_attn:
            self.Wqkv = linear_cls(embed_dim, 3 * embed_dim, bias=qkv_proj_bias, **factory_kwargs)
        else:
            self.Wq = linear_cls(embed_dim, embed_dim, bias=qkv_proj_bias, **factory_kwargs)
            self.Wkv = linear_cls(embed_dim, 2 * embed_dim, bias=qkv_proj_bias, **factory_kwargs)
        inner_attn_cls = FlashSelfAttention
        inner_cross_attn_cls = FlashCrossAttention
        self.inner_attn = inner_attn_cls(causal=causal, softmax_scale=softmax_scale, attention_dropout=dropout)
        self.inner_cross_attn = inner_cross_attn_cls(
            causal=causal, softmax_scale=softmax_scale, attention_dropout=dropout
        )
        self.out_proj = linear_cls(embed_dim, embed_dim, bias=out_proj_bias, **factory_kwargs)

    def forward(self, x, x_kv=None, cu_seqlens=None, max_seqlen=None, **kwargs):
        kwargs = (
            {"cu_seqlens": cu_seqlens, "max_seqlen": max_seqlen, **kwargs}
            if self.use_flash_attn
            else kwargs
        )
        if not self.cross_attn:
            qkv = self.Wqkv(x)
            qkv = rearrange(qkv, "... (three h d) -> ... three h d", three=3, d=self.head_dim)
            if self.checkpointing and torch.is_grad_enabled():
                context = torch.utils.checkpoint.checkpoint(self.inner_attn, qkv, use_reentrant=False, **kwargs)
            else:
                context = self.inner_attn(qkv, **kwargs)
        else:
            q = rearrange(self.Wq(x), "... (h d) -> ... h d", d=self.head_dim)
            kv = rearrange(self.Wkv(x_kv if x_kv is not None else x), "... (two h d) -> ... two h d",
                           two=2, d=self.head_dim)
            context = self.inner_cross_attn(q, kv, **kwargs)
        out = self.out_proj(rearrange(context, "... h d -> ... (h d)"))
        return out
