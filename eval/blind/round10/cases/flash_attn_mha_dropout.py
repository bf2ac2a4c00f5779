# Adapted from Dao-AILab/flash-attention flash_attn/modules/mha.py (FlashSelfAttention.forward)
import torch
import torch.nn as nn


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, dropout_p, softmax_scale, causal):
    q, k, v = qkv.unbind(dim=1)
    attn = torch.softmax((q @ k.transpose(-1, -2)) * softmax_scale, dim=-1)
    attn = torch.nn.functional.dropout(attn, p=dropout_p)
    return attn @ v


class FlashSelfAttention(nn.Module):
    def __init__(self, causal=False, softmax_scale=None, attention_dropout=0.0):
        super().__init__()
        self.causal = causal
        self.softmax_scale = softmax_scale
        self.drop = nn.Dropout(attention_dropout)

    def forward(self, qkv, cu_seqlens=None, max_seqlen=None, causal=None):
        causal = self.causal if causal is None else causal
        scale = self.softmax_scale or qkv.shape[-1] ** -0.5
        if cu_seqlens is not None:
            # look-alike: training mode, not grad mode
            p = self.drop.p if self.training else 0.0
            return flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, p, scale, causal)
        dropout_p = self.drop.p if torch.is_grad_enabled() else 0.0
        return flash_attn_varlen_qkvpacked_func(qkv, None, qkv.shape[1], dropout_p, scale, causal)
