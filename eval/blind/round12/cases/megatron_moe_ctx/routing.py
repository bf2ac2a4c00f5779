# adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/moe_utils.py
import torch

from .state import MoEForwardState


def _normalize(probs: torch.Tensor, topk: int) -> torch.Tensor:
    if topk == 1:
        return probs
    return probs / (probs.sum(dim=-1, keepdim=True) + 1e-20)


def topk_routing(logits: torch.Tensor, topk: int, use_pre_softmax: bool = False, scaling_factor=None):
    if use_pre_softmax:
        scores = torch.softmax(logits, dim=-1, dtype=torch.float32)
        probs, top_indices = torch.topk(scores, k=topk, dim=1)
    else:
        scores, top_indices = torch.topk(logits, k=topk, dim=1, sorted=MoEForwardState.grad_enabled)
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32)
    if scaling_factor:
        probs = probs * scaling_factor
    probs = probs.type_as(logits)
    routing_probs = torch.zeros_like(logits).scatter(1, top_indices, probs)
    routing_map = torch.zeros_like(logits).int().scatter(1, top_indices, 1).bool()
    return routing_probs, routing_map
