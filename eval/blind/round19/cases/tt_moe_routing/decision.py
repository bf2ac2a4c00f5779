# adapted from pytorch/torchtitan torchtitan/models/moe.py
from dataclasses import dataclass

import torch


@dataclass
class RoutingDecision:
    # aux-loss-free load balancing (https://arxiv.org/abs/2408.15664) is a training-time device
    use_bias_routing: bool = True


def decide_routing() -> RoutingDecision:
    return RoutingDecision(use_bias_routing=torch.is_grad_enabled())
