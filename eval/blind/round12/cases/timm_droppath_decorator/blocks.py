# adapted from huggingface/pytorch-image-models timm/layers/drop.py (Block wiring around DropPath)
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

from .layers import DropPath


class Block(nn.Module):
    def __init__(self, dim, num_heads, mlp_ratio=4., drop_path=0.):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, num_heads, batch_first=True)
        self.drop_path1 = DropPath(drop_path) if drop_path > 0. else nn.Identity()
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, int(dim * mlp_ratio)), nn.GELU(), nn.Linear(int(dim * mlp_ratio), dim))
        self.drop_path2 = DropPath(drop_path) if drop_path > 0. else nn.Identity()
        self.grad_checkpointing = False

    def _forward(self, x):
        y = self.norm1(x)
        x = x + self.drop_path1(self.attn(y, y, y, need_weights=False)[0])
        x = x + self.drop_path2(self.mlp(self.norm2(x)))
        return x

    def forward(self, x):
        if self.grad_checkpointing and torch.is_grad_enabled():
            return checkpoint(self._forward, x, use_reentrant=False)
        return self._forward(x)
