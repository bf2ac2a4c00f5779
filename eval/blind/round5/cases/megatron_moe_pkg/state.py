"""Per-step routing flags, built once per forward."""
from dataclasses import dataclass, field

import torch


@dataclass
class RoutingStepState:
    sorted_topk: bool = True
    drop_tokens: bool = True
    extra: dict = field(default_factory=dict)


def current_routing_flags() -> dict:
    grad = torch.is_grad_enabled()
    return {"sorted_topk": grad, "train": grad}
