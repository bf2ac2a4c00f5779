from dataclasses import dataclass

from .config import CommOverlapConfig


@dataclass(frozen=True)
class RuntimeFlags:
    grad_enabled: bool
    tp_comm_overlap: bool
    overlap_grad_reduce: bool
    overlap_param_gather: bool


def resolve_runtime_flags(cfg: CommOverlapConfig, grad_enabled: bool) -> RuntimeFlags:
    return RuntimeFlags(
        grad_enabled=grad_enabled,
        tp_comm_overlap=cfg.tp_comm_overlap and grad_enabled,
        overlap_grad_reduce=cfg.overlap_grad_reduce and grad_enabled,
        overlap_param_gather=cfg.overlap_param_gather and grad_enabled,
    )
