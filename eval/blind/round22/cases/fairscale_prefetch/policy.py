# adapted from facebookresearch/fairscale fairscale/nn/data_parallel/fully_sharded_data_parallel.py
from typing import Dict, List

import torch
import torch.nn as nn


class ExecOrderTracer:
    """Records the order in which FSDP instances run forward, so later forwards can prefetch."""

    def __init__(self) -> None:
        self.order: List[nn.Module] = []

    def reset(self) -> None:
        self.order.clear()

    def record(self, module: nn.Module) -> None:
        self.order.append(module)


class PrefetchPolicy:
    def __init__(self) -> None:
        self.enabled = True

    def refresh(self) -> "PrefetchPolicy":
        self.enabled = torch.is_grad_enabled()
        return self


_POLICIES: Dict[int, PrefetchPolicy] = {}


def get_prefetch_policy(process_group) -> PrefetchPolicy:
    key = id(process_group)
    if key not in _POLICIES:
        _POLICIES[key] = PrefetchPolicy()
    return _POLICIES[key].refresh()
