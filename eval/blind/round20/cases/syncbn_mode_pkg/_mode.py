# adapted from pytorch/pytorch torch/nn/modules/batchnorm.py
from typing import NamedTuple, Optional

import torch
import torch.distributed as dist


class NormMode(NamedTuple):
    grad_enabled: bool
    track_running_stats: bool
    process_group: Optional[dist.ProcessGroup]


def resolve_mode(module) -> NormMode:
    process_group = module.process_group if module.process_group else dist.group.WORLD
    return NormMode(
        grad_enabled=torch.is_grad_enabled(),
        track_running_stats=module.track_running_stats,
        process_group=process_group,
    )
