"""Fast attention and MLP paths for Llama-style decoder layers."""
import torch
import torch.nn.functional as F

from unsloth.kernels import fast_swiglu_inference, apply_lora_mlp_swiglu, inplace_rope_embedding

try:
    from flash_attn import flash_attn_func
    HAS_FLASH_ATTENTION = True
except ImportError:
    HAS_FLASH_ATTENTION = False


def LlamaMLP_fast_forward(self, X):
    bsz, q_len, _ = X.shape
    if not torch.is_grad_enabled() and q_len == 1:
        return fast_swiglu_inference(self, X)
    return apply_lora_mlp_swiglu(self, X)


def LlamaAttention_fast_forward(self, hidden_states, causal_mask=None, attention_mask=None, position_ids=None):
    bsz, q_len, _ = hidden_states.size()
    n_heads = self.config.num_attention_heads
    n_kv_heads = self.config.num_key_value_heads
    head_dim = self.head_dim
    Q = self.q_proj(hidden_states).view(bsz, q_len, n_heads, head_dim).transpose(1, 2)
    K = self.k_proj(hidden_states).view(bsz, q_len, n_kv_heads, head_dim).transpose(1, 2)
    V = self.v_proj(hidden_states).view(bsz, q_len, n_kv_heads, head_dim).transpose(1, 2)
    cos, sin = self.rotary_emb(V, seq_len=q_len)
    Q, K = inplace_rope_embedding(Q, K, cos, sin, position_ids)

    use_flash = HAS_FLASH_ATTENTION and attention_mask is None and torch.is_grad_enabled()
    if use_flash:
        Q, K, V = Q.transpose(1, 2), K.transpose(1, 2), V.transpose(1, 2)
        A = flash_attn_func(Q, K, V, causal=True)
    else:
        n_groups = n_heads // n_kv_heads
        if n_groups != 1:
            K = K[:, :, None, :, :].expand(bsz, n_kv_heads, n_groups, q_len, head_dim)
            V = V[:, :, None, :, :].expand(bsz, n_kv_heads, n_groups, q_len, head_dim)
            K = K.reshape(bsz, n_heads, q_len, head_dim)
            V = V.reshape(bsz, n_heads, q_len, head_dim)
        A = F.scaled_dot_product_attention(
            Q.float(), K.float(), V.float(), attn_mask=attention_mask, is_causal=attention_mask is None
        ).to(Q.dtype)
        A = A.transpose(1, 2).contiguous()
    attn_output = A.reshape(bsz, q_len, n_heads * head_dim)
    return self.apply_o(self, attn_output)
