import torch
import torch.nn as nn
import torch.nn.functional as F
from functools import partial

from transformers.modeling_utils import PreTrainedModel
from transformers.utils import logging

logger = logging.get_logger(__name__)


def sdpa_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None):
    is_causal = is_causal if is_causal is not None else (attention_mask is None and query.shape[2] > 1)
    out = F.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling, is_causal=is_causal
    )
    return out.transpose(1, 2).contiguous(), None


class LlamaAttention(nn.Module):

    def __init__(self, config, layer_idx):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.scaling = self.head_dim ** -0.5
        self.attention_dropout = config.attention_dropout
        self.q_proj = nn.Linear(config.hidden_size, config.hidden_size, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, config.hidden_size, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, config.hidden_size, bias=False)
        self.o_proj = nn.Linear(config.hidden_size, config.hidden_size, bias=False)

    def forward(self, hidden_states, attention_mask=None, **kwargs):
        bsz, q_len, _ = hidden_states.shape
        shape = (bsz, q_len, -1, self.head_dim)
        q = self.q_proj(hidden_states).view(shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        training_step = torch.is_grad_enabled()
        attn_kwargs = dict(
            dropout=self.attention_dropout if training_step else 0.0,
            scaling=self.scaling,
        )
        attn_output, attn_weights = sdpa_attention_forward(self, q, k, v, attention_mask, **attn_kwargs)
        attn_output = attn_output.reshape(bsz, q_len, -1)
        return self.o_proj(attn_output), attn_weights


class LlamaModel(PreTrainedModel):
    supports_gradient_checkpointing = True

    def __init__(self, config, layers):
        super().__init__(config)
        self.layers = nn.ModuleList(layers)
        self.gradient_checkpointing = False
        self._gradient_checkpointing_func = partial(torch.utils.checkpoint.checkpoint, use_reentrant=True)

    def forward(self, hidden_states, attention_mask=None, use_cache=False):
        if self.gradient_checkpointing and self.training and use_cache:
            logger.warning_once("`use_cache=True` is incompatible with gradient checkpointing.")
            use_cache = False
        for decoder_layer in self.layers:
            if self.gradient_checkpointing and torch.is_grad_enabled():
                hidden_states = self._gradient_checkpointing_func(
                    decoder_layer.__call__, hidden_states, attention_mask
                )
            else:
                hidden_states = decoder_layer(hidden_states, attention_mask=attention_mask)
        return hidden_states
