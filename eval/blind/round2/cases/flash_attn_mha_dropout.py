# Modelled on flash-attention flash_attn/flash_attn_interface.py (PR #1383 is_grad) and flash_attn/modules/mha.py
import torch
import torch.nn as nn
from einops import rearrange

import flash_attn_2_cuda as flash_attn_gpu
from flash_attn import flash_attn_kvpacked_func, flash_attn_with_kvcache


def _flash_attn_forward(q, k, v, dropout_p, softmax_scale, causal, window_size_left, window_size_right,
                        softcap, alibi_slopes, return_softmax):
    out, softmax_lse, S_dmask, rng_state = flash_attn_gpu.fwd(
        q, k, v, None, alibi_slopes, dropout_p, softmax_scale, causal,
        window_size_left, window_size_right, softcap, return_softmax, None,
    )
    return out, softmax_lse, S_dmask, rng_state


class FlashAttnQKVPackedFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, qkv, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                deterministic, return_softmax, is_grad_enabled):
        is_grad = is_grad_enabled and qkv.requires_grad
        if softmax_scale is None:
            softmax_scale = qkv.shape[-1] ** (-0.5)
        q, k, v = qkv[:, :, 0].detach(), qkv[:, :, 1].detach(), qkv[:, :, 2].detach()
        out_padded, softmax_lse, S_dmask, rng_state = _flash_attn_forward(
            q, k, v, dropout_p, softmax_scale, causal=causal,
            window_size_left=window_size[0], window_size_right=window_size[1],
            softcap=softcap, alibi_slopes=alibi_slopes,
            return_softmax=return_softmax and dropout_p > 0,
        )
        if is_grad:
            ctx.save_for_backward(q, k, v, out_padded, softmax_lse, rng_state)
            ctx.dropout_p = dropout_p
            ctx.softmax_scale = softmax_scale
            ctx.causal = causal
            ctx.window_size = window_size
            ctx.softcap = softcap
            ctx.alibi_slopes = alibi_slopes
            ctx.deterministic = deterministic
        out = out_padded[..., : q.shape[-1]]
        return out if not return_softmax else (out, softmax_lse, S_dmask)


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                              softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    return FlashAttnQKVPackedFunc.apply(
        qkv, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
        deterministic, return_attn_probs, torch.is_grad_enabled(),
    )


class FlashSelfAttention(nn.Module):
    def __init__(self, causal=False, softmax_scale=None, attention_dropout=0.0, window_size=(-1, -1),
                 alibi_slopes=None, deterministic=False):
        super().__init__()
        self.causal = causal
        self.softmax_scale = softmax_scale
        self.drop = nn.Dropout(attention_dropout)
        self.register_buffer("alibi_slopes", alibi_slopes, persistent=False)
        self.window_size = window_size
        self.deterministic = deterministic

    def forward(self, qkv, causal=None):
        causal = self.causal if causal is None else causal
        return flash_attn_qkvpacked_func(
            qkv,
            self.drop.p if torch.is_grad_enabled() else 0.0,
            softmax_scale=self.softmax_scale,
            causal=causal,
            alibi_slopes=self.alibi_slopes,
            window_size=self.window_size,
            deterministic=self.deterministic,
        )


class MHA(nn.Module):
    def __init__(self, embed_dim, num_heads, causal=True, dropout=0.0, layer_idx=None):
        super().__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.layer_idx = layer_idx
        self.Wqkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.inner_attn = FlashSelfAttention(causal=causal, attention_dropout=dropout)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def _apply_rotary_update_kvcache_attention(self, q, kv, inference_params):
        kv_cache = inference_params.key_value_memory_dict[self.layer_idx]
        cache_seqlens = inference_params.lengths_per_sample or inference_params.seqlen_offset
        return flash_attn_with_kvcache(
            q, kv_cache[:, :, 0], kv_cache[:, :, 1], kv[:, :, 0], kv[:, :, 1],
            cache_seqlens=cache_seqlens, softmax_scale=self.inner_attn.softmax_scale,
            causal=self.inner_attn.causal,
        )

    def _update_kv_cache(self, kv, inference_params):
        kv_cache = inference_params.key_value_memory_dict[self.layer_idx]
        batch_start = inference_params.batch_size_offset
        batch_end = batch_start + kv.shape[0]
        sequence_start = inference_params.seqlen_offset
        sequence_end = sequence_start + kv.shape[1]
        kv_cache[batch_start:batch_end, sequence_start:sequence_end, ...] = kv
        return kv_cache[batch_start:batch_end, :sequence_end, ...]

    def forward(self, x, inference_params=None):
        qkv = self.Wqkv(x)
        qkv = rearrange(qkv, "... (three h d) -> ... three h d", three=3, d=self.head_dim)
        if inference_params is None or inference_params.seqlen_offset == 0:
            if inference_params is not None:
                self._update_kv_cache(qkv[:, :, 1:], inference_params)
            context = self.inner_attn(qkv)
        elif not torch.is_grad_enabled():
            # decoding step: fused forward-only kv-cache kernel (no backward implementation)
            context = self._apply_rotary_update_kvcache_attention(qkv[:, :, 0], qkv[:, :, 1:], inference_params)
        else:
            kv = self._update_kv_cache(qkv[:, :, 1:], inference_params)
            context = flash_attn_kvpacked_func(
                qkv[:, :, 0], kv, softmax_scale=self.inner_attn.softmax_scale, causal=self.inner_attn.causal
            )
        return self.out_proj(rearrange(context, "... h d -> ... (h d)"))
