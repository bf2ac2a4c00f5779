# adapted from pytorch/torchtitan torchtitan/models/moe.py
from typing import Callable, Dict, Type

import torch

ROUTER_POLICIES: Dict[str, Type["RoutingPolicy"]] = {}


def register_policy(name: str) -> Callable[[Type["RoutingPolicy"]], Type["RoutingPolicy"]]:
    def _wrap(cls):
        ROUTER_POLICIES[name] = cls
        return cls
    return _wrap


class RoutingPolicy:
    bias_enabled: bool = False
    noise_std: float = 0.0

    def __init__(self) -> None:
        self.grad_enabled = False

    def use_expert_bias(self) -> bool:
        return self.bias_enabled


def policy_for_step(name: str) -> RoutingPolicy:
    policy = ROUTER_POLICIES[name]()
    policy.grad_enabled = torch.is_grad_enabled()
    return policy
