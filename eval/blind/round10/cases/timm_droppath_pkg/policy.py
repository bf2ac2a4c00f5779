# Grad-mode alias and a partial-application factory used by the blocks module.
import functools
import torch

from .ops import drop_path

grad_mode = torch.is_grad_enabled


def make_drop(p: float):
    return functools.partial(drop_path, drop_prob=p, training=torch.is_grad_enabled())
