from typing import Optional, Tuple

import torch
from torch.nn.functional import scaled_dot_product_attention

from unsloth.kernels import fast_rope_embedding, inplace_rope_embedding

try:
    from flash_attn import flash_attn_func

    HAS_FLASH_ATTENTION = True
except ImportError:
    HAS_FLASH_ATTENTION = False

try:
    import xformers.ops.fmha as xformers

    xformers_attention = xformers.memory_efficient_attention
    HAS_XFORMERS = True
except ImportError:
    HAS_XFORMERS = False


def LlamaAttention_fast_forward(
    self,
    hidden_states: torch.Tensor,
    causal_mask=None,
    attention_mask: Optional[torch.Tensor] = None,
    position_ids: Optional[torch.LongTensor] = None,
    past_key_value: Optional[Tuple[torch.Tensor]] = None,
    use_cache: bool = False,
    position_embeddings=None,
    *args,
    **kwargs,
):
    bsz, q_len, _ = hidden_states.size()
    n_heads = self.config.num_attention_heads
    n_groups = self.num_key_value_groups
    n_kv_heads = self.config.num_key_value_heads
    head_dim = self.head_dim

    Q, K, V = self.apply_qkv(self, hidden_states)
    Q = Q.view(bsz, q_len, n_heads, head_dim).transpose(1, 2)
    K = K.view(bsz, q_len, n_kv_heads, head_dim).transpose(1, 2)
    V = V.view(bsz, q_len, n_kv_heads, head_dim).transpose(1, 2)

    cos, sin = position_embeddings
    if position_ids is None:
        Q, K = fast_rope_embedding(Q, K, cos, sin)
    else:
        Q, K = inplace_rope_embedding(Q, K, cos, sin, position_ids)

    if past_key_value is not None:
        K = torch.cat([past_key_value[0], K], dim=2)
        V = torch.cat([past_key_value[1], V], dim=2)
    past_key_value = (K, V) if use_cache else None

    use_flash = HAS_FLASH_ATTENTION and attention_mask is None and torch.is_grad_enabled()
    if not use_flash and HAS_XFORMERS and attention_mask is None:
        Q = Q.transpose(1, 2)
        K = K.transpose(1, 2)
        V = V.transpose(1, 2)
        kv_seq_len = K.shape[1]
        if n_groups != 1:
            K = K.view(bsz, kv_seq_len, n_kv_heads, 1, head_dim).expand(bsz, kv_seq_len, n_kv_heads, n_groups, head_dim)
            V = V.view(bsz, kv_seq_len, n_kv_heads, 1, head_dim).expand(bsz, kv_seq_len, n_kv_heads, n_groups, head_dim)
            Q = Q.view(bsz, q_len, n_kv_heads, n_groups, head_dim)
        A = xformers_attention(Q, K, V, attn_bias=causal_mask)
        A = A.view(bsz, q_len, n_heads, head_dim)
    elif use_flash:
        Q = Q.transpose(1, 2)
        K = K.transpose(1, 2)
        V = V.transpose(1, 2)
        A = flash_attn_func(Q, K, V, causal=True)
    else:
        if n_groups != 1:
            K = K.repeat_interleave(n_groups, dim=1)
            V = V.repeat_interleave(n_groups, dim=1)
        Q, K, V = Q.contiguous(), K.contiguous(), V.contiguous()
        A = scaled_dot_product_attention(Q, K, V, attn_mask=attention_mask, is_causal=False)
        A = A.transpose(1, 2).contiguous()

    attn_output = A.reshape(bsz, q_len, n_heads * head_dim)
    attn_output = self.apply_o(self, attn_output)
    return attn_output, None, past_key_value
