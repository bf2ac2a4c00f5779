# adapted from pytorch/torchtitan torchtitan/models/common/moe/moe.py
import torch
import torch.nn as nn
import torch.nn.functional as F


class TokenChoiceTopKRouter(nn.Module):
    """Top-K router: each token picks its top_k experts."""

    def __init__(self, dim: int, num_experts: int, top_k: int, score_func: str = "softmax",
                 route_norm: bool = False, route_scale: float = 1.0):
        super().__init__()
        self.gate = nn.Linear(dim, num_experts, bias=False)
        self.num_experts = num_experts
        self.top_k = top_k
        self.score_func = score_func
        self.route_norm = route_norm
        self.route_scale = route_scale

    def forward(self, x: torch.Tensor, expert_bias: torch.Tensor | None = None, *,
                sorted_topk: bool = True, return_probs: bool = True):
        scores = self.gate(x)
        if self.score_func == "sigmoid":
            scores = torch.sigmoid(scores.to(torch.float32))
        else:
            scores = F.softmax(scores.to(torch.float32), dim=1)
        choice = scores + expert_bias if expert_bias is not None else scores
        _, selected_experts_indices = torch.topk(choice, k=self.top_k, dim=1, sorted=sorted_topk)
        top_scores = scores.gather(dim=1, index=selected_experts_indices)
        if self.route_norm:
            top_scores = top_scores / (top_scores.sum(dim=-1, keepdim=True) + 1e-20)
        top_scores = top_scores * self.route_scale
        num_tokens_per_expert = torch.histc(
            selected_experts_indices.view(-1), bins=self.num_experts, min=0, max=self.num_experts
        )
        return top_scores, selected_experts_indices, num_tokens_per_expert
