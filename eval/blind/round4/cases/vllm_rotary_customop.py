# Modeled on vLLM vllm/model_executor/custom_op.py (CustomOp.dispatch_forward) and
# vllm/model_executor/layers/rotary_embedding.py (RotaryEmbedding.forward_native/forward_cuda).
import torch
import torch.nn as nn


class CustomOp(nn.Module):
    def forward(self, *args, **kwargs):
        # The CUDA kernel rotates q/k in place and has no autograd formula; it is only
        # selected when autograd cannot record anything (inference mode).
        if torch.is_inference_mode_enabled() and self.enabled():
            return self.forward_cuda(*args, **kwargs)
        return self.forward_native(*args, **kwargs)

    @classmethod
    def enabled(cls) -> bool:
        return torch.cuda.is_available()

    def forward_native(self, *args, **kwargs):
        raise NotImplementedError

    def forward_cuda(self, *args, **kwargs):
        raise NotImplementedError


class RotaryEmbedding(CustomOp):
    def __init__(self, head_size, rotary_dim, max_position_embeddings, base, is_neox_style, dtype):
        super().__init__()
        self.head_size = head_size
        self.rotary_dim = rotary_dim
        self.max_position_embeddings = max_position_embeddings
        self.base = base
        self.is_neox_style = is_neox_style
        inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float) / rotary_dim))
        t = torch.arange(max_position_embeddings, dtype=torch.float)
        freqs = torch.einsum("i,j -> ij", t, inv_freq)
        cache = torch.cat((freqs.cos(), freqs.sin()), dim=-1).to(dtype)
        self.register_buffer("cos_sin_cache", cache, persistent=False)

    def forward_native(self, positions, query, key):
        cos_sin = self.cos_sin_cache.index_select(0, positions.flatten())
        cos, sin = cos_sin.chunk(2, dim=-1)
        def rot(x):
            shape = x.shape
            x = x.view(positions.numel(), -1, self.head_size)
            x_rot, x_pass = x[..., : self.rotary_dim], x[..., self.rotary_dim:]
            x1, x2 = torch.chunk(x_rot, 2, dim=-1)
            c, s = cos.unsqueeze(-2), sin.unsqueeze(-2)
            x_rot = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
            return torch.cat((x_rot, x_pass), dim=-1).reshape(shape)
        return rot(query), rot(key)

    def forward_cuda(self, positions, query, key):
        from vllm import _custom_ops as ops
        ops.rotary_embedding(positions, query, key, self.head_size, self.cos_sin_cache, self.is_neox_style)
        return query, key
