import math
from typing import Optional

import torch


def get_capacity(num_tokens: int, num_experts: int, capacity_factor: float, min_capacity=None):
    capacity = math.ceil((num_tokens / num_experts) * capacity_factor)
    if min_capacity is not None and capacity < min_capacity:
        capacity = min_capacity
    return capacity


def topk_softmax_with_capacity(
    logits: torch.Tensor,
    topk: int,
    capacity_factor: Optional[float] = None,
    pad_to_capacity: bool = False,
    drop_policy: str = "probs",
    score_function: str = "softmax",
    sorted_topk: bool = True,
    **unused,
):
    num_tokens, num_experts = logits.shape
    if score_function == "softmax":
        scores, top_indices = torch.topk(logits, k=topk, dim=1, sorted=sorted_topk)
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32).type_as(logits)
    else:
        scores = torch.sigmoid(logits.float()).type_as(logits)
        probs, top_indices = torch.topk(scores, k=topk, dim=1)
        probs = probs / (probs.sum(dim=-1, keepdim=True) + 1e-20)

    topk_masked_gates = torch.zeros_like(logits).scatter(1, top_indices, probs)
    topk_map = torch.zeros_like(logits).int().scatter(1, top_indices, 1).bool()
    tokens_per_expert = topk_map.sum(dim=0)

    # column 0 is the first-choice expert; the dispatcher routes it to the local shared-expert path
    primary_expert = top_indices[:, 0]

    if capacity_factor is None:
        return topk_masked_gates, topk_map, primary_expert

    expert_capacity = get_capacity(num_tokens * topk, num_experts, capacity_factor)
    if drop_policy == "probs":
        _, capacity_indices = torch.topk(topk_masked_gates, k=expert_capacity, dim=0, sorted=False)
        capacity_mask = torch.zeros_like(logits).scatter(0, capacity_indices, 1).bool()
    else:
        raise ValueError(f"Invalid drop_policy: {drop_policy}")
    final_map = torch.logical_and(topk_map, capacity_mask) if not pad_to_capacity else capacity_mask
    final_probs = topk_masked_gates * final_map
    return final_probs, final_map, primary_expert
