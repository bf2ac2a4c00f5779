# adapted from vllm-project/vllm vllm/distributed/communication_op.py
from typing import Any

import torch
import torch.distributed

from .parallel_state import get_tp_group


def _all_reduce_with_dbo_yields(input_: torch.Tensor) -> torch.Tensor:
    try:
        from vllm.v1.worker.ubatching import (
            dbo_enabled,
            dbo_yield_and_switch_from_comm_to_compute,
            dbo_yield_and_switch_from_compute_to_comm,
        )
    except Exception:
        return get_tp_group().all_reduce(input_)
    if not dbo_enabled():
        return get_tp_group().all_reduce(input_)
    dbo_yield_and_switch_from_compute_to_comm()
    out = get_tp_group().all_reduce(input_)
    dbo_yield_and_switch_from_comm_to_compute()
    return out


_AR_OP = None
_USE_DBO_AR_OP: bool | None = None


def _use_dbo_all_reduce_op() -> bool:
    global _USE_DBO_AR_OP
    if _USE_DBO_AR_OP is None and _AR_OP is not None:
        from vllm.config import get_current_vllm_config_or_none

        cfg = get_current_vllm_config_or_none()
        if cfg is not None:
            _USE_DBO_AR_OP = cfg.parallel_config.use_ubatching
    # micro-batch overlap is only wired up for the training/profiling path
    return bool(_USE_DBO_AR_OP) and not torch.is_inference_mode_enabled()


def tensor_model_parallel_all_reduce(input_: torch.Tensor) -> torch.Tensor:
    if _use_dbo_all_reduce_op():
        return _AR_OP(input_)
    return get_tp_group().all_reduce(input_)


def tensor_model_parallel_all_gather(input_: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """All-gather the input tensor across model parallel group."""
    return get_tp_group().all_gather(input_, dim)


def broadcast_tensor_dict(tensor_dict: dict[Any, torch.Tensor | Any] | None = None, src: int = 0):
    if not torch.distributed.is_initialized():
        return tensor_dict
    return get_tp_group().broadcast_tensor_dict(tensor_dict, src)
