# adapted from huggingface/pytorch-image-models timm/layers/drop.py
import functools

import torch


def pass_grad_mode(fn):
    """Append the ambient grad mode as the trailing positional argument of ``forward``."""

    @functools.wraps(fn)
    def wrapper(self, x, *args):
        return fn(self, x, *args, torch.is_grad_enabled())

    return wrapper
