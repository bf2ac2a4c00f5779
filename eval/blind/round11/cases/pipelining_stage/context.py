# Adapted from pytorch/pytorch torch/distributed/pipelining/schedules.py (per-step arguments of _step_microbatches).
from dataclasses import dataclass, field

from torch import is_grad_enabled as _grad_mode_now


@dataclass
class StageRuntimeCtx:
    chunk_id: int
    grad_enabled: bool = field(default_factory=_grad_mode_now)
    is_last_chunk: bool = False


def make_runtime_ctx(chunk_id: int, n_microbatches: int) -> StageRuntimeCtx:
    return StageRuntimeCtx(chunk_id=chunk_id, is_last_chunk=chunk_id == n_microbatches - 1)
