"""Top-k router with optional expert capacity and load-balancing loss."""
import torch

from megatron.core.transformer.moe.moe_utils import (
    MoEAuxLossAutoScaler,
    sequence_load_balancing_loss_func,
    switch_load_balancing_loss_func,
)


def topk_softmax_with_capacity(logits, topk, capacity_factor=None, pad_to_capacity=False, drop_policy="probs"):
    num_tokens, num_experts = logits.shape
    scores, top_indices = torch.topk(logits, k=topk, dim=1)
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).type_as(logits)
    topk_masked_gates = torch.zeros_like(logits).scatter(1, top_indices, probs)
    topk_map = torch.zeros_like(logits).int().scatter(1, top_indices, 1).bool()
    tokens_per_expert = topk_map.sum(dim=0)
    if capacity_factor is None:
        return topk_masked_gates, topk_map, tokens_per_expert
    expert_capacity = int(torch.ceil(torch.tensor(num_tokens * topk / num_experts * capacity_factor)))
    score = topk_masked_gates if drop_policy == "probs" else topk_map
    _, capacity_indices = torch.topk(score, k=expert_capacity, dim=0, sorted=False)
    capacity_mask = torch.zeros_like(logits).scatter(0, capacity_indices, 1).bool()
    final_map = torch.logical_and(topk_map, capacity_mask)
    final_probs = topk_masked_gates * final_map
    return final_probs, final_map, final_map.sum(dim=0)


class TopKRouter(torch.nn.Module):
    def __init__(self, config) -> None:
        super().__init__()
        self.config = config
        self.topk = config.moe_router_topk
        self.num_experts = config.num_moe_experts
        self.weight = torch.nn.Parameter(torch.empty((config.num_moe_experts, config.hidden_size)))
        self.routing_type = config.moe_router_load_balancing_type

    def apply_load_balancing_loss(self, activation, probs, num_local_tokens_per_expert):
        aux_loss = switch_load_balancing_loss_func(
            probs, num_local_tokens_per_expert, self.topk, self.config.moe_aux_loss_coeff
        )
        return MoEAuxLossAutoScaler.apply(activation, aux_loss)

    def routing(self, logits: torch.Tensor):
        logits = logits.view(-1, self.num_experts)
        capacity = self.config.moe_expert_capacity_factor if torch.is_grad_enabled() else None
        probs, routing_map, tokens_per_expert = topk_softmax_with_capacity(
            logits, self.topk, capacity_factor=capacity,
            pad_to_capacity=self.config.moe_pad_expert_input_to_capacity,
            drop_policy=self.config.moe_token_drop_policy,
        )
        if self.routing_type == "aux_loss" and torch.is_grad_enabled():
            scores = torch.softmax(logits, dim=-1, dtype=torch.float32)
            probs = self.apply_load_balancing_loss(probs, scores, tokens_per_expert)
        return probs, routing_map

    def forward(self, input: torch.Tensor):
        logits = torch.nn.functional.linear(input, self.weight)
        return self.routing(logits)
