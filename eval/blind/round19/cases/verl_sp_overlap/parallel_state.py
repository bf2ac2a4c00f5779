# adapted from volcengine/verl verl/utils/ulysses.py
from contextlib import contextmanager
from typing import Optional

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroup

_ULYSSES_SEQUENCE_PARALLEL_GROUP = None
_ULYSSES_OVERLAP = False


def set_ulysses_sequence_parallel_group(group: dist.ProcessGroup):
    """
    Set ulysses sequence parallel process group.
    """
    global _ULYSSES_SEQUENCE_PARALLEL_GROUP
    _ULYSSES_SEQUENCE_PARALLEL_GROUP = group


def get_ulysses_sequence_parallel_group() -> Optional[dist.ProcessGroup]:
    """
    Get ulysses sequence parallel process group.
    """
    global _ULYSSES_SEQUENCE_PARALLEL_GROUP
    return _ULYSSES_SEQUENCE_PARALLEL_GROUP


def get_ulysses_sequence_parallel_world_size(group: ProcessGroup = None) -> int:
    group = get_ulysses_sequence_parallel_group() if group is None else group
    return dist.get_world_size(group) if group else 1


@contextmanager
def ulysses_forward_scope():
    """Actor/critic forward: remember whether this pass will be differentiated."""
    global _ULYSSES_OVERLAP
    prev = _ULYSSES_OVERLAP
    _ULYSSES_OVERLAP = torch.is_grad_enabled()
    try:
        yield
    finally:
        _ULYSSES_OVERLAP = prev


def get_ulysses_overlap() -> bool:
    global _ULYSSES_OVERLAP
    return _ULYSSES_OVERLAP
