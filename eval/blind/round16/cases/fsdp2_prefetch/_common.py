# adapted from pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_common.py
from enum import auto, Enum

import torch


class TrainingState(Enum):
    """Describes the training state of one FSDP state / parameter group."""

    FORWARD = auto()
    PRE_BACKWARD = auto()
    POST_BACKWARD = auto()
    IDLE = auto()


def _grad_on() -> bool:
    """Whether the current forward is recording an autograd graph."""
    return torch.is_grad_enabled()


def _cast_fp_tensor(dtype: torch.dtype, x: torch.Tensor) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or not torch.is_floating_point(x) or x.dtype == dtype:
        return x
    return x.to(dtype)
