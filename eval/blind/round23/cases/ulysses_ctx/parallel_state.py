# adapted from volcengine/verl verl/utils/ulysses.py
from contextlib import contextmanager
from typing import Optional

import torch
import torch.distributed as dist

_ULYSSES_SEQUENCE_PARALLEL_GROUP = None
_ULYSSES_ASYNC_A2A = True


def set_ulysses_sequence_parallel_group(group: dist.ProcessGroup):
    global _ULYSSES_SEQUENCE_PARALLEL_GROUP
    _ULYSSES_SEQUENCE_PARALLEL_GROUP = group


def get_ulysses_sequence_parallel_group() -> Optional[dist.ProcessGroup]:
    global _ULYSSES_SEQUENCE_PARALLEL_GROUP
    return _ULYSSES_SEQUENCE_PARALLEL_GROUP


def get_ulysses_sequence_parallel_world_size(group=None) -> int:
    group = get_ulysses_sequence_parallel_group() if group is None else group
    return dist.get_world_size(group) if group else 1


@contextmanager
def ulysses_forward_scope():
    """Entered by the actor around each model forward."""
    global _ULYSSES_ASYNC_A2A
    prev = _ULYSSES_ASYNC_A2A
    _ULYSSES_ASYNC_A2A = torch.is_grad_enabled()
    try:
        yield
    finally:
        _ULYSSES_ASYNC_A2A = prev


def async_all_to_all_enabled() -> bool:
    return _ULYSSES_ASYNC_A2A
