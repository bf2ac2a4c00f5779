# adapted from huggingface/pytorch-image-models timm/layers/drop.py
import torch
import torch.nn as nn
import torch.nn.functional as F


def drop_block_fast_2d(x, drop_prob=0.1, block_size=7, gamma_scale=1.0, with_noise=False, inplace=False):
    B, C, H, W = x.shape
    total_size = W * H
    clipped_block_size = min(block_size, min(W, H))
    gamma = gamma_scale * drop_prob * total_size / clipped_block_size ** 2 / (
            (W - block_size + 1) * (H - block_size + 1))
    block_mask = torch.empty_like(x).bernoulli_(gamma)
    block_mask = F.max_pool2d(
        block_mask.to(x.dtype), kernel_size=clipped_block_size, stride=1, padding=clipped_block_size // 2)
    block_mask = 1 - block_mask
    normalize_scale = (block_mask.numel() / block_mask.to(dtype=torch.float32).sum().add(1e-6)).to(dtype=x.dtype)
    return x * block_mask * normalize_scale


class DropBlock2d(nn.Module):
    def __init__(self, drop_prob: float = 0.1, block_size: int = 7, gamma_scale: float = 1.0):
        super(DropBlock2d, self).__init__()
        self.drop_prob = drop_prob
        self.gamma_scale = gamma_scale
        self.block_size = block_size

    def forward(self, x):
        if not self.training or not self.drop_prob:
            return x
        return drop_block_fast_2d(x, self.drop_prob, self.block_size, self.gamma_scale)


def drop_path(x, drop_prob: float = 0., training: bool = False, scale_by_keep: bool = True):
    """Drop paths (Stochastic Depth) per sample (when applied in main path of residual blocks)."""
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
        super(DropPath, self).__init__()
        self.drop_prob = drop_prob
        self.scale_by_keep = scale_by_keep

    def forward(self, x):
        # stochastic depth is a no-op for frozen feature extraction
        return drop_path(x, self.drop_prob, torch.is_grad_enabled(), self.scale_by_keep)

    def extra_repr(self):
        return f'drop_prob={round(self.drop_prob,3):0.3f}'
