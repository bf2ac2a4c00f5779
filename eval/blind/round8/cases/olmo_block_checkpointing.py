from enum import Enum

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    from flash_attn import flash_attn_func
except ImportError:
    flash_attn_func = None


class ActivationCheckpointingStrategy(str, Enum):
    whole_layer = "whole_layer"
    one_in_two = "one_in_two"
    one_in_four = "one_in_four"


def should_checkpoint_block(strategy, block_idx):
    if strategy is None or not torch.is_grad_enabled():
        return False
    if strategy == ActivationCheckpointingStrategy.whole_layer:
        return True
    if strategy == ActivationCheckpointingStrategy.one_in_two:
        return block_idx % 2 == 0
    return block_idx % 4 == 0


def use_flash(config, q):
    return config.flash_attention and flash_attn_func is not None and q.is_cuda and torch.is_grad_enabled()


class OLMoBlock(nn.Module):

    def __init__(self, layer_id, config):
        super().__init__()
        self.layer_id = layer_id
        self.config = config
        self.att_proj = nn.Linear(config.d_model, 3 * config.d_model, bias=config.include_bias)
        self.attn_out = nn.Linear(config.d_model, config.d_model, bias=config.include_bias)
        self._activation_checkpoint_fn = None

    def _scaled_dot_product_attention(self, q, k, v, dropout_p=0.0, is_causal=False):
        if use_flash(self.config, q):
            r = flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                dropout_p=dropout_p, causal=is_causal)
            return r.transpose(1, 2)
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=is_causal)

    def attention(self, x):
        B, T, C = x.size()
        q, k, v = self.att_proj(x).split(C, dim=-1)
        nh = self.config.n_heads
        q = q.view(B, T, nh, C // nh).transpose(1, 2)
        k = k.view(B, T, nh, C // nh).transpose(1, 2)
        v = v.view(B, T, nh, C // nh).transpose(1, 2)
        att = self._scaled_dot_product_attention(
            q, k, v, dropout_p=0.0 if not self.training else self.config.attention_dropout, is_causal=True
        )
        return self.attn_out(att.transpose(1, 2).contiguous().view(B, T, C))

    def forward(self, x):
        return x + self.attention(x)


class OLMoBlockGroup(nn.ModuleList):

    def __init__(self, config, layer_offset, modules=None):
        super().__init__(modules)
        self.config = config
        self.layer_offset = layer_offset
        self.activation_checkpointing_strategy = None

    def forward(self, x):
        for block_idx, block in enumerate(self):
            if should_checkpoint_block(self.activation_checkpointing_strategy, self.layer_offset + block_idx):
                x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return x
