# adapted from facebookresearch/fairscale fairscale/nn/data_parallel/fully_sharded_data_parallel.py
from enum import Enum, auto
from typing import NamedTuple

import torch


class TrainingState(Enum):
    IDLE = auto()
    FORWARD = auto()
    BACKWARD_PRE = auto()
    BACKWARD_POST = auto()


class ForwardContext(NamedTuple):
    grad: bool
    is_root: bool


def forward_context(is_root: bool) -> ForwardContext:
    return ForwardContext(grad=torch.is_grad_enabled(), is_root=is_root)
