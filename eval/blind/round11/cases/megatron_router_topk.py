# Adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/moe_utils.py
# (topk_routing_with_score_function / compute_topk closure) and moe/router.py (TopKRouter.routing).
from typing import Optional

import torch


def group_limited_topk(scores, topk, num_tokens, num_experts, num_groups, group_topk):
    group_scores = scores.view(num_tokens, num_groups, -1).topk(topk // group_topk, dim=-1)[0].sum(dim=-1)
    group_idx = torch.topk(group_scores, k=group_topk, dim=-1, sorted=False)[1]
    group_mask = torch.zeros_like(group_scores)
    group_mask.scatter_(1, group_idx, 1)
    score_mask = (
        group_mask.unsqueeze(-1).expand(num_tokens, num_groups, num_experts // num_groups).reshape(num_tokens, -1)
    )
    masked_scores = scores.masked_fill(~score_mask.bool(), float("-inf"))
    return torch.topk(masked_scores, k=topk, dim=-1)


def topk_routing_with_score_function(
    logits: torch.Tensor,
    topk: int,
    use_pre_softmax: bool = False,
    num_groups: Optional[int] = None,
    group_topk: Optional[int] = None,
    scaling_factor: Optional[float] = None,
):
    num_tokens, num_experts = logits.shape

    def compute_topk(scores, topk, num_groups=None, group_topk=None):
        if group_topk:
            return group_limited_topk(scores, topk, num_tokens, num_experts, num_groups, group_topk)
        return torch.topk(scores, k=topk, dim=1, sorted=torch.is_grad_enabled())

    if use_pre_softmax:
        scores = torch.softmax(logits, dim=-1, dtype=torch.float32)
        probs, top_indices = compute_topk(scores, topk, num_groups, group_topk)
    else:
        scores, top_indices = compute_topk(logits, topk, num_groups, group_topk)
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32)

    if scaling_factor:
        probs = probs * scaling_factor

    routing_probs = torch.zeros_like(logits).scatter(1, top_indices, probs)
    routing_map = torch.zeros_like(logits).int().scatter(1, top_indices, 1).bool()
    return routing_probs, routing_map


class TopKRouter(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.topk = config.moe_router_topk

    def apply_load_balancing_loss(self, probs, routing_map):
        aux_loss = (probs.mean(0) * routing_map.float().mean(0)).sum() * self.config.moe_aux_loss_coeff
        return MoEAuxLossAutoScaler.apply(probs, aux_loss)

    def routing(self, logits: torch.Tensor):
        probs, routing_map = topk_routing_with_score_function(
            logits,
            self.topk,
            use_pre_softmax=self.config.moe_router_pre_softmax,
            num_groups=self.config.moe_router_num_groups,
            group_topk=self.config.moe_router_group_topk,
            scaling_factor=self.config.moe_router_topk_scaling_factor,
        )
        if self.training and torch.is_grad_enabled() and self.config.moe_aux_loss_coeff > 0:
            probs = self.apply_load_balancing_loss(probs, routing_map)
        if torch.are_deterministic_algorithms_enabled():
            routing_map = routing_map.contiguous()
        return probs, routing_map


class MoEAuxLossAutoScaler(torch.autograd.Function):
    main_loss_backward_scale = torch.tensor(1.0)

    @staticmethod
    def forward(ctx, output, aux_loss):
        ctx.save_for_backward(aux_loss)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        (aux_loss,) = ctx.saved_tensors
        return grad_output, torch.ones_like(aux_loss) * MoEAuxLossAutoScaler.main_loss_backward_scale
