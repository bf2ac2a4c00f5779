# adapted from Dao-AILab/flash-attention flash_attn/modules/mha.py
import torch
import torch.nn as nn

try:
    from flash_attn import flash_attn_kvpacked_func, flash_attn_qkvpacked_func
except ImportError:
    flash_attn_qkvpacked_func, flash_attn_kvpacked_func = None, None


class FlashSelfAttention(nn.Module):
    def __init__(self, causal=False, softmax_scale=None, attention_dropout=0.0):
        super().__init__()
        self.causal = causal
        self.softmax_scale = softmax_scale
        self.drop = nn.Dropout(attention_dropout)

    def forward(self, qkv, causal=None):
        assert qkv.dtype in [torch.float16, torch.bfloat16]
        causal = self.causal if causal is None else causal
        attn_kwargs = dict(
            dropout_p=self.drop.p if torch.is_grad_enabled() else 0.0,
            softmax_scale=self.softmax_scale,
            causal=causal,
        )
        return flash_attn_qkvpacked_func(qkv, **attn_kwargs)


class FlashCrossAttention(nn.Module):
    def __init__(self, causal=False, softmax_scale=None, attention_dropout=0.0):
        super().__init__()
        self.causal = causal
        self.softmax_scale = softmax_scale
        self.drop = nn.Dropout(attention_dropout)

    def forward(self, q, kv, causal=None):
        causal = self.causal if causal is None else causal
        batch_size, seqlen_q = q.shape[0], q.shape[1]
        assert kv.shape[0] == batch_size and kv.shape[4] == q.shape[3]
        return flash_attn_kvpacked_func(
            q,
            kv,
            self.drop.p if self.training else 0.0,
            causal=causal,
            softmax_scale=self.softmax_scale,
        )
