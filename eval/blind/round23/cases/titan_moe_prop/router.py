# adapted from pytorch/torchtitan torchtitan/models/moe.py
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from .base import GradModeAwareModule


class TokenChoiceTopKRouter(GradModeAwareModule):
    def __init__(self, dim: int, num_experts: int, top_k: int, score_func: Literal["softmax", "sigmoid"],
                 route_norm: bool, route_scale: float):
        super().__init__()
        self.gate = nn.Linear(dim, num_experts, bias=False)
        self.num_experts = num_experts
        self.top_k = top_k
        self.score_func = score_func
        self.route_norm = route_norm
        self.route_scale = route_scale

    def forward(self, x: torch.Tensor, expert_bias: torch.Tensor | None = None):
        scores = self.gate(x)
        if self.score_func == "sigmoid":
            scores = torch.sigmoid(scores.to(torch.float32))
        elif self.score_func == "softmax":
            scores = F.softmax(scores.to(torch.float32), dim=1)
        else:
            raise NotImplementedError(f"Unknown score function {self.score_func}")

        use_bias = expert_bias is not None and self._is_train_step
        if use_bias:
            _, selected_experts_indices = torch.topk(scores + expert_bias, k=self.top_k, dim=1)
            top_scores = scores.gather(dim=1, index=selected_experts_indices)
        else:
            top_scores, selected_experts_indices = torch.topk(scores, k=self.top_k, dim=1)

        if self.route_norm:
            denominator = top_scores.sum(dim=-1, keepdim=True) + 1e-20
            top_scores = top_scores / denominator
        top_scores = top_scores * self.route_scale
        num_tokens_per_expert = torch.histc(
            selected_experts_indices.view(-1), bins=self.num_experts, min=0, max=self.num_experts,
        )
        return top_scores, selected_experts_indices, num_tokens_per_expert
