# Adapted from huggingface/pytorch-image-models timm/layers/drop.py (drop_path)
import torch


def drop_path(x, drop_prob: float = 0.0, training: bool = False, scale_by_keep: bool = True):
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    mask = x.new_empty(shape).bernoulli_(keep_prob)
    if scale_by_keep:
        mask.div_(keep_prob)
    return x * mask
