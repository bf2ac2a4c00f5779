import math
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):

    def __init__(self, config, block_idx):
        super().__init__()
        self.config = config
        self.block_idx = block_idx
        shape = (config.n_head + 2 * config.n_query_groups) * config.head_size
        self.qkv = nn.Linear(config.n_embd, shape, bias=config.bias)
        self.proj = nn.Linear(config.head_size * config.n_head, config.n_embd, bias=config.bias)
        self.kv_cache = None

    def scaled_dot_product_attention(self, q, k, v, mask=None):
        scale = 1.0 / math.sqrt(self.config.attention_scores_scalar or self.config.head_size)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=0.0, scale=scale, is_causal=mask is None
        )
        return y.transpose(1, 2)

    def forward(self, x, cos, sin, mask=None, input_pos=None):
        B, T, C = x.size()
        qkv = self.qkv(x)
        q_per_kv = self.config.n_head // self.config.n_query_groups
        qkv = qkv.view(B, T, self.config.n_query_groups, q_per_kv + 2, self.config.head_size)
        qkv = qkv.permute(0, 2, 3, 1, 4)
        q, k, v = qkv.split((q_per_kv, 1, 1), dim=2)
        q = q.reshape(B, -1, T, self.config.head_size)
        k = k.expand(B, self.config.n_query_groups, q_per_kv, T, self.config.head_size).reshape(B, -1, T, self.config.head_size)
        v = v.expand(B, self.config.n_query_groups, q_per_kv, T, self.config.head_size).reshape(B, -1, T, self.config.head_size)
        if input_pos is not None:
            if not isinstance(self.kv_cache, nn.Module):
                raise TypeError("You need to call `gpt.set_kv_cache()`")
            k, v = self.kv_cache(input_pos, k, v)
        y = self.scaled_dot_product_attention(q, k, v, mask)
        y = y.reshape(B, T, self.config.head_size * self.config.n_head)
        return self.proj(y)


class GPT(nn.Module):

    def __init__(self, config, blocks, wte, ln_f, lm_head, mask_cache):
        super().__init__()
        self.config = config
        self.wte = wte
        self.h = nn.ModuleList(blocks)
        self.ln_f = ln_f
        self.lm_head = lm_head
        self.mask_cache = mask_cache
        self.cos = None
        self.sin = None

    def forward(self, idx, input_pos=None):
        T = idx.size(1)
        if input_pos is not None and torch.is_grad_enabled():
            warnings.warn("KV-cache decoding with grad enabled will retain the whole cache graph")
        match (torch.is_grad_enabled(), input_pos is None):
            case (True, True):
                cos, sin, mask = self.cos[:T], self.sin[:T], None
            case (_, True):
                cos, sin = self.cos[:T], self.sin[:T]
                mask = self.mask_cache[:, :, :T, :T]
            case _:
                cos, sin = self.cos.index_select(0, input_pos), self.sin.index_select(0, input_pos)
                mask = self.mask_cache.index_select(2, input_pos)[:, :, :, : input_pos.max() + 1]
        x = self.wte(idx)
        for block in self.h:
            x = block(x, cos, sin, mask, input_pos)
        return self.lm_head(self.ln_f(x))
