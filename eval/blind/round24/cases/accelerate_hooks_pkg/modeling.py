# adapted from huggingface/accelerate src/accelerate/hooks.py
import torch
import torch.nn as nn
import torch.nn.functional as F

from .hooks import GradModeHook, add_hook_to_module


class OffloadedBlock(nn.Module):
    def __init__(self, dim: int, n_heads: int, dropout: float = 0.1, attn_dropout: float = 0.1):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.dropout = nn.Dropout(dropout)
        self.attn_dropout = attn_dropout
        add_hook_to_module(self, GradModeHook())

    def _grad_norm_hook(self, grad):
        self._last_grad_norm = grad.norm()
        return grad

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, C // self.n_heads).permute(2, 0, 3, 1, 4)
        dropout_p = self.attn_dropout if getattr(self, "_grad_active", False) else 0.0
        hidden = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
        hidden = hidden.transpose(1, 2).reshape(B, T, C)
        if getattr(self, "_grad_active", False) and hidden.requires_grad:
            hidden.register_hook(self._grad_norm_hook)
        out = self.proj(hidden)
        out = self.dropout(out) if getattr(self, "_grad_active", False) else out
        return x + out
