# Adapted from huggingface/diffusers src/diffusers/models/attention_processor.py (AttnProcessor2_0)
# and models/transformers/transformer_flux.py (gradient checkpointing branch)
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


class AttnProcessor2_0:
    def __init__(self, force_math=False):
        self.force_math = force_math

    def __call__(self, attn, hidden_states, encoder_hidden_states=None):
        q = attn.to_q(hidden_states)
        ctx = hidden_states if encoder_hidden_states is None else encoder_hidden_states
        k, v = attn.to_k(ctx), attn.to_v(ctx)
        b, n, _ = q.shape
        q, k, v = (t.view(b, -1, attn.heads, t.shape[-1] // attn.heads).transpose(1, 2) for t in (q, k, v))
        use_math = self.force_math or not torch.is_grad_enabled()
        backend = SDPBackend.MATH if use_math else SDPBackend.FLASH_ATTENTION
        with sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(q, k, v)
        out = out.transpose(1, 2).reshape(b, n, -1)
        return attn.to_out[0](out)


class FluxBlocks(torch.nn.Module):
    def __init__(self, blocks):
        super().__init__()
        self.blocks = torch.nn.ModuleList(blocks)
        self.gradient_checkpointing = False

    def forward(self, hidden_states, temb):
        for block in self.blocks:
            if torch.is_grad_enabled() and self.gradient_checkpointing:
                hidden_states = torch.utils.checkpoint.checkpoint(block, hidden_states, temb, use_reentrant=False)
            else:
                hidden_states = block(hidden_states, temb)
        return hidden_states
