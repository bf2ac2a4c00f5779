# adapted from bitsandbytes-foundation/bitsandbytes bitsandbytes/functional.py
import functools

import torch
from torch import Tensor

from .cextension import lib

name2qmap = {}


def _grad_mode_rounding(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        kwargs.setdefault("stochastic", torch.is_grad_enabled())
        return fn(*args, **kwargs)
    return wrapper


@_grad_mode_rounding
def quantize_blockwise(A: Tensor, code=None, absmax=None, out=None, blocksize=4096, stochastic=False):
    if code is None:
        code = name2qmap["dynamic"]
    if absmax is None:
        absmax = torch.zeros((A.numel() + blocksize - 1) // blocksize, device=A.device)
    if out is None:
        out = torch.zeros_like(A, dtype=torch.uint8)
    if stochastic:
        rand = torch.rand(1024, device=A.device)
        lib.cquantize_blockwise_stochastic(code, A, absmax, out, rand, blocksize, A.numel())
    else:
        lib.cquantize_blockwise(code, A, absmax, out, blocksize, A.numel())
    return out, absmax
