# adapted from pytorch/torchtitan torchtitan/models/moe.py
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from ._registry import policy_for_step, register_policy, RoutingPolicy


@register_policy("aux_loss_free")
class AuxLossFreePolicy(RoutingPolicy):
    bias_enabled = True

    def use_expert_bias(self) -> bool:
        # expert_bias is learned from training-time token counts
        return self.grad_enabled and super().use_expert_bias()


@register_policy("aux_loss_free_noisy")
class NoisyAuxLossFreePolicy(AuxLossFreePolicy):
    noise_std = 1e-2


class TokenChoiceTopKRouter(nn.Module):
    def __init__(self, dim: int, num_experts: int, top_k: int, score_func: Literal["softmax", "sigmoid"],
                 route_norm: bool, route_scale: float, policy_name: str = "aux_loss_free"):
        super().__init__()
        self.gate = nn.Linear(dim, num_experts, bias=False)
        self.num_experts = num_experts
        self.top_k = top_k
        self.score_func = score_func
        self.route_norm = route_norm
        self.route_scale = route_scale
        self.policy_name = policy_name

    def forward(self, x: torch.Tensor, expert_bias: torch.Tensor | None = None):
        policy = policy_for_step(self.policy_name)
        scores = self.gate(x)

        if self.score_func == "sigmoid":
            scores = torch.sigmoid(scores.to(torch.float32))
        elif self.score_func == "softmax":
            scores = F.softmax(scores.to(torch.float32), dim=1)
        else:
            raise NotImplementedError(f"Unknown score function {self.score_func}")

        routing_scores = scores
        if policy.grad_enabled and policy.noise_std > 0:
            routing_scores = routing_scores + torch.randn_like(routing_scores) * policy.noise_std

        if expert_bias is not None and policy.use_expert_bias():
            _, selected_experts_indices = torch.topk(routing_scores + expert_bias, k=self.top_k, dim=1)
            top_scores = scores.gather(dim=1, index=selected_experts_indices)
        else:
            _, selected_experts_indices = torch.topk(routing_scores, k=self.top_k, dim=1)
            top_scores = scores.gather(dim=1, index=selected_experts_indices)

        if self.route_norm:
            denominator = top_scores.sum(dim=-1, keepdim=True) + 1e-20
            top_scores = top_scores / denominator
        top_scores = top_scores * self.route_scale

        if torch.is_grad_enabled() and top_scores.requires_grad:
            # keep router gradients finite when a token's experts all got dropped
            top_scores.register_hook(torch.nan_to_num)

        num_tokens_per_expert = torch.histc(
            selected_experts_indices.view(-1), bins=self.num_experts, min=0, max=self.num_experts,
        )
        return top_scores, selected_experts_indices, num_tokens_per_expert
