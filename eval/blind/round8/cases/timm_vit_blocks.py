import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def drop_path(x, drop_prob=0.0, training=False, scale_by_keep=True):
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    if keep_prob > 0.0 and scale_by_keep:
        random_tensor.div_(keep_prob)
    return x * random_tensor


def checkpoint_seq(functions, x, every=1):
    for i, fn in enumerate(functions):
        x = checkpoint(fn, x, use_reentrant=False) if i % every == 0 else fn(x)
    return x


class Attention(nn.Module):

    def __init__(self, dim, num_heads=8, qkv_bias=False, attn_drop=0.0):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        x = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_drop.p if self.training else 0.0)
        return self.proj(x.transpose(1, 2).reshape(B, N, C))


class Block(nn.Module):

    def __init__(self, dim, num_heads, mlp, drop_path_rate=0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = mlp
        self.drop_prob = drop_path_rate

    def forward(self, x):
        grad = torch.is_grad_enabled()
        residual = lambda t: drop_path(t, self.drop_prob, grad)
        x = x + residual(self.attn(self.norm1(x)))
        x = x + residual(self.mlp(self.norm2(x)))
        return x


class VisionTransformer(nn.Module):

    def __init__(self, patch_embed, blocks, norm, head):
        super().__init__()
        self.patch_embed = patch_embed
        self.blocks = nn.Sequential(*blocks)
        self.norm = norm
        self.head = head
        self.grad_checkpointing = False

    def set_grad_checkpointing(self, enable=True):
        self.grad_checkpointing = enable

    def forward_features(self, x):
        x = self.patch_embed(x)
        if self.grad_checkpointing and torch.is_grad_enabled() and not torch.jit.is_scripting():
            x = checkpoint_seq(self.blocks, x)
        else:
            x = self.blocks(x)
        return self.norm(x)

    def forward(self, x):
        x = self.forward_features(x)
        return self.head(x[:, 0])
