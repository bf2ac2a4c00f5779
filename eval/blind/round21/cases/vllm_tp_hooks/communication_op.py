# adapted from vllm-project/vllm vllm/distributed/communication_op.py
from typing import Any

import torch
import torch.distributed

from vllm.distributed.parallel_state import get_tp_group

_AR_OP = None
_USE_DBO_AR_OP: bool | None = None


def _use_dbo_all_reduce_op() -> bool:
    global _USE_DBO_AR_OP
    if _USE_DBO_AR_OP is None and _AR_OP is not None:
        from vllm.config import get_current_vllm_config_or_none

        cfg = get_current_vllm_config_or_none()
        if cfg is not None:
            _USE_DBO_AR_OP = cfg.parallel_config.use_ubatching
    return bool(_USE_DBO_AR_OP)


def tensor_model_parallel_all_reduce(input_: torch.Tensor) -> torch.Tensor:
    group = get_tp_group()
    if _use_dbo_all_reduce_op() and getattr(group, "grad_at_forward", True):
        return _AR_OP(input_)
    return group.all_reduce(input_)


def tensor_model_parallel_all_gather(input_: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """All-gather the input tensor across model parallel group."""
    group = get_tp_group()
    use_async = getattr(group, "grad_at_forward", False)
    if use_async:
        return group.all_gather_async(input_, dim).wait()
    return group.all_gather(input_, dim)


def broadcast_tensor_dict(tensor_dict: dict[Any, torch.Tensor | Any] | None = None, src: int = 0):
    if not torch.distributed.is_initialized():
        return tensor_dict
    return get_tp_group().broadcast_tensor_dict(tensor_dict, src)
