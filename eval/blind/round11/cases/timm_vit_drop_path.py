# Adapted from huggingface/pytorch-image-models timm/layers/drop.py (drop_path, DropPath, DropBlock2d)
# and timm/models/vision_transformer.py (Block.forward, VisionTransformer.forward_features).
import torch
import torch.nn as nn

from timm.layers import drop_block_fast_2d
from timm.models._manipulate import checkpoint_seq


def drop_path(x, drop_prob: float = 0., training: bool = False, scale_by_keep: bool = True):
    if drop_prob == 0. or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    if keep_prob > 0.0 and scale_by_keep:
        random_tensor.div_(keep_prob)
    return x * random_tensor


class DropPath(nn.Module):
    def __init__(self, drop_prob: float = 0., scale_by_keep: bool = True):
        super().__init__()
        self.drop_prob = drop_prob
        self.scale_by_keep = scale_by_keep

    def forward(self, x):
        return drop_path(x, self.drop_prob, torch.is_grad_enabled(), self.scale_by_keep)


class DropBlock2d(nn.Module):
    def __init__(self, drop_prob: float = 0.1, block_size: int = 7, gamma_scale: float = 1.0):
        super().__init__()
        self.drop_prob = drop_prob
        self.block_size = block_size
        self.gamma_scale = gamma_scale

    def forward(self, x):
        if not self.training or not self.drop_prob:
            return x
        return drop_block_fast_2d(x, self.drop_prob, self.block_size, self.gamma_scale)


class Block(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop_path1(self.ls1(self.attn(self.norm1(x))))
        x = x + self.drop_path2(self.ls2(self.mlp(self.norm2(x))))
        return x


class VisionTransformer(nn.Module):
    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x)
        x = self._pos_embed(x)
        x = self.patch_drop(x)
        x = self.norm_pre(x)
        if self.grad_checkpointing and torch.is_grad_enabled() and not torch.jit.is_scripting():
            x = checkpoint_seq(self.blocks, x)
        else:
            x = self.blocks(x)
        x = self.norm(x)
        return x
