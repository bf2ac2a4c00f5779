# Adapted from huggingface/pytorch-image-models timm/models/vision_transformer.py (Block, VisionTransformer)
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from .policy import grad_mode, make_drop


class Mlp(nn.Module):
    def __init__(self, dim, hidden, p=0.1):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.p = p

    def forward(self, x):
        x = F.gelu(self.fc1(x))
        x = F.dropout(x, p=self.p if grad_mode() else 0.0, training=True)
        return self.fc2(x)


class Block(nn.Module):
    def __init__(self, dim, drop_path=0.1):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, dim * 4)
        self.drop_path = drop_path

    def forward(self, x):
        drop = make_drop(self.drop_path)
        return x + drop(self.mlp(self.norm(x)))


class VisionTransformer(nn.Module):
    def __init__(self, dim, depth):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(dim) for _ in range(depth)])
        self.grad_checkpointing = False

    def forward(self, x):
        if grad_mode() and self.grad_checkpointing:
            return checkpoint(self.blocks, x, use_reentrant=False)
        return self.blocks(x)
