# adapted from huggingface/pytorch-image-models timm/layers/drop.py
import functools

import torch

__all__ = ["infer_training"]


def infer_training(fn):
    """Fill in the ``training`` argument of a functional regulariser when the
    caller did not pass it positionally or by keyword."""

    @functools.wraps(fn)
    def wrapper(x, *args, **kwargs):
        if len(args) < 2:
            kwargs.setdefault("training", torch.is_grad_enabled())
        return fn(x, *args, **kwargs)

    wrapper.__wrapped_regulariser__ = True
    return wrapper
