# adapted from facebookresearch/fairscale fairscale/nn/data_parallel/fully_sharded_data_parallel.py
import contextlib
from typing import Generator

import torch

# Grad mode observed when the root FSDP instance entered forward.
_FWD_GRAD_ENABLED: bool = True


@contextlib.contextmanager
def forward_context() -> Generator[None, None, None]:
    global _FWD_GRAD_ENABLED
    prev = _FWD_GRAD_ENABLED
    _FWD_GRAD_ENABLED = torch.is_grad_enabled()
    try:
        yield
    finally:
        _FWD_GRAD_ENABLED = prev


def forward_grad_enabled() -> bool:
    return _FWD_GRAD_ENABLED
