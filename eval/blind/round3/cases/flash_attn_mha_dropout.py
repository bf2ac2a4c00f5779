# Modelled on flash_attn/flash_attn_interface.py and flash_attn/modules/mha.py (flash-attention 2.6-2.7).
import torch
import torch.nn as nn

import flash_attn_2_cuda as flash_attn_gpu


def _flash_attn_forward(q, k, v, dropout_p, softmax_scale, causal, window_size_left, window_size_right,
                        softcap, alibi_slopes, return_softmax):
    out, softmax_lse, S_dmask, rng_state = flash_attn_gpu.fwd(
        q, k, v, None, alibi_slopes, dropout_p, softmax_scale, causal, window_size_left, window_size_right,
        softcap, return_softmax, None,
    )
    return out, softmax_lse, S_dmask, rng_state


class FlashAttnQKVPackedFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, qkv, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                return_softmax, is_grad_enabled):
        is_grad = is_grad_enabled and qkv.requires_grad
        if softmax_scale is None:
            softmax_scale = qkv.shape[-1] ** (-0.5)
        q, k, v = qkv[:, :, 0].detach(), qkv[:, :, 1].detach(), qkv[:, :, 2].detach()
        out, softmax_lse, S_dmask, rng_state = _flash_attn_forward(
            q, k, v, dropout_p, softmax_scale, causal=causal, window_size_left=window_size[0],
            window_size_right=window_size[1], softcap=softcap, alibi_slopes=alibi_slopes,
            return_softmax=return_softmax and dropout_p > 0,
        )
        if is_grad:
            ctx.save_for_backward(q, k, v, out, softmax_lse, rng_state)
            ctx.dropout_p = dropout_p
            ctx.softmax_scale = softmax_scale
            ctx.causal = causal
            ctx.window_size = window_size
            ctx.softcap = softcap
            ctx.alibi_slopes = alibi_slopes
            ctx.deterministic = deterministic
        return out if not return_softmax else (out, softmax_lse, S_dmask)

    @staticmethod
    def backward(ctx, dout, *args):
        raise NotImplementedError


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                              softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    return FlashAttnQKVPackedFunc.apply(
        qkv, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
        return_attn_probs, torch.is_grad_enabled(),
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
        assert qkv.dtype in [torch.float16, torch.bfloat16]
        causal = self.causal if causal is None else causal
        grad_mode = torch.is_grad_enabled()
        return flash_attn_qkvpacked_func(
            qkv,
            self.drop.p if grad_mode else 0.0,
            softmax_scale=self.softmax_scale,
            causal=causal,
            alibi_slopes=self.alibi_slopes,
            window_size=self.window_size,
            deterministic=self.deterministic and grad_mode,
        )
