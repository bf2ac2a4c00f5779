# adapted from woct0rdho/ACE-Step models/customer_attention_processor.py
import torch
import torch.nn.functional as F


class CustomerAttnProcessor2_0:
    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None):
        query = attn.to_q(hidden_states)
        key = attn.to_k(encoder_hidden_states if encoder_hidden_states is not None else hidden_states)
        value = attn.to_v(encoder_hidden_states if encoder_hidden_states is not None else hidden_states)
        upcast = torch.is_grad_enabled() or attn.upcast_attention
        if upcast:
            query, key = query.float(), key.float()
        L = query.shape[1]
        chunk = 1024
        start = 0
        outs = []
        while start < L and not torch.is_grad_enabled():
            outs.append(F.scaled_dot_product_attention(query[:, start:start + chunk], key, value))
            start += chunk
        if start < L:
            outs.append(F.scaled_dot_product_attention(query[:, start:], key, value))
        return torch.cat(outs, dim=1).to(value.dtype)
