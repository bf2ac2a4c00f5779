# adapted from KimmiShi/TorchDistPackage explore/memory-profile/attention_processor.py
import torch
import torch.nn.functional as F

from diffusers.utils.import_utils import is_xformers_available

if is_xformers_available():
    import xformers
    import xformers.ops
else:
    xformers = None


class AttnProcessor2_0:
    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, temb=None):
        batch_size, sequence_length, _ = hidden_states.shape
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states
        query = attn.to_q(hidden_states)
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)
        with torch.set_grad_enabled(attn.training):
            query = attn.head_to_batch_dim(query)
        match torch.is_grad_enabled():
            case True:
                hidden_states = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask)
            case _:
                hidden_states = xformers.ops.memory_efficient_attention(query, key, value, attn_bias=attention_mask)
        hidden_states = attn.to_out[0](hidden_states)
        return hidden_states
