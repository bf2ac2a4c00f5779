"""Per-forward Ulysses sequence-parallel context (cf. verl/utils/ulysses.py globals)."""
from dataclasses import dataclass
from typing import Optional

import torch.distributed as dist


@dataclass
class UlyssesContext:
    group: Optional[dist.ProcessGroup]
    sp_size: int
    grad_enabled: bool
    overlap_qkv_all_to_all: bool = False


_ULYSSES_CONTEXT: Optional[UlyssesContext] = None


def set_ulysses_context(ctx: Optional[UlyssesContext]) -> None:
    global _ULYSSES_CONTEXT
    _ULYSSES_CONTEXT = ctx


def get_ulysses_context() -> Optional[UlyssesContext]:
    return _ULYSSES_CONTEXT
