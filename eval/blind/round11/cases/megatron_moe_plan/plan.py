# Adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/moe_utils.py (get_capacity and router config use).
import math
from typing import NamedTuple

import torch


class DispatchPlan(NamedTuple):
    sorted_topk: bool
    overlap_a2a: bool
    capacity_factor: float
    pad_to_capacity: bool


def plan_for_forward(config) -> DispatchPlan:
    grad_enabled = torch.is_grad_enabled()
    return DispatchPlan(
        sorted_topk=grad_enabled,
        overlap_a2a=config.moe_overlap_a2a and grad_enabled,
        capacity_factor=config.moe_expert_capacity_factor if grad_enabled else config.moe_eval_capacity_factor,
        pad_to_capacity=config.moe_pad_expert_input_to_capacity,
    )


def get_capacity(num_tokens: int, num_experts: int, capacity_factor: float, min_capacity=None):
    capacity = math.ceil((num_tokens / num_experts) * capacity_factor)
    if min_capacity is not None and capacity < min_capacity:
        capacity = min_capacity
    return capacity
