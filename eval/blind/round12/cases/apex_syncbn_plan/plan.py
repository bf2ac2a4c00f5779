# adapted from NVIDIA/apex apex/parallel/optimized_sync_batchnorm.py
from typing import NamedTuple

import torch
import torch.distributed as dist


class NormPlan(NamedTuple):
    sync_stats: bool
    update_running: bool
    momentum: float


def make_norm_plan(module) -> NormPlan:
    grad = torch.is_grad_enabled()
    world = dist.get_world_size(module.process_group) if dist.is_initialized() else 1
    momentum = 0.0 if module.momentum is None else module.momentum
    return NormPlan(
        sync_stats=grad and world > 1,
        update_running=module.training and module.track_running_stats,
        momentum=momentum,
    )
