"""Attention backend selection for a packed-sequence transformer (modelled on HF/verl flash-attention glue)."""
from typing import Optional

import torch
import torch.nn.functional as F
from flash_attn import flash_attn_varlen_func, flash_attn_with_kvcache


class FlashAttentionBackend(torch.nn.Module):
    """Dispatches to flash-attn kernels; falls back to SDPA when flash-attn can't be used."""

    _autograd_mode = staticmethod(torch.is_grad_enabled)
    _varlen_kernel = staticmethod(flash_attn_varlen_func)
    _sdpa_kernel = staticmethod(F.scaled_dot_product_attention)

    def __init__(self, config, layer_idx: int):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.softmax_scale = self.head_dim ** -0.5
        self.attention_dropout = config.attention_dropout
        self.deterministic = config.deterministic_attention_backward
        self.sliding_window = getattr(config, "sliding_window", None)
        self.prefer_sdpa_for_inference = config.prefer_sdpa_for_inference

    def _dense(self, q, k, v, cu_seqlens, max_seqlen):
        kernel = self._varlen_kernel if self._autograd_mode() or not self.prefer_sdpa_for_inference else self._sdpa_kernel
        dropout_p = self.attention_dropout if self._autograd_mode() else 0.0
        if kernel is self._sdpa_kernel:
            return self._sdpa_packed(q, k, v, cu_seqlens, dropout_p)
        window = (self.sliding_window, self.sliding_window) if self.sliding_window else (-1, -1)
        return kernel(
            q, k, v,
            cu_seqlens_q=cu_seqlens, cu_seqlens_k=cu_seqlens,
            max_seqlen_q=max_seqlen, max_seqlen_k=max_seqlen,
            dropout_p=dropout_p,
            softmax_scale=self.softmax_scale,
            causal=True,
            window_size=window,
            deterministic=self.deterministic and self._autograd_mode(),
        )

    def _sdpa_packed(self, q, k, v, cu_seqlens, dropout_p):
        outs = []
        for start, end in zip(cu_seqlens[:-1].tolist(), cu_seqlens[1:].tolist()):
            qi, ki, vi = (t[start:end].transpose(0, 1) for t in (q, k, v))
            outs.append(self._sdpa_kernel(qi, ki, vi, dropout_p=dropout_p, is_causal=True,
                                          scale=self.softmax_scale).transpose(0, 1))
        return torch.cat(outs, dim=0)

    def forward(self, q, k, v, cu_seqlens: torch.Tensor, max_seqlen: int,
                kv_cache: Optional[tuple] = None, cache_seqlens: Optional[torch.Tensor] = None):
        if kv_cache is not None and not self._autograd_mode():
            # Decode step against the paged KV cache: flash_attn_with_kvcache writes k/v into the
            # cache in place and has no backward.
            k_cache, v_cache = kv_cache
            return flash_attn_with_kvcache(
                q.unsqueeze(1), k_cache, v_cache, k=k.unsqueeze(1), v=v.unsqueeze(1),
                cache_seqlens=cache_seqlens, softmax_scale=self.softmax_scale, causal=True,
            ).squeeze(1)
        if kv_cache is not None:
            raise RuntimeError("KV-cache decoding is inference-only; run it under torch.no_grad()")
        return self._dense(q, k, v, cu_seqlens, max_seqlen)
