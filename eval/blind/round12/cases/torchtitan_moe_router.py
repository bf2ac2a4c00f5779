# adapted from pytorch/torchtitan torchtitan/models/moe/moe.py
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import is_grad_enabled


class TokenChoiceTopKRouter(nn.Module):
    def __init__(self, dim: int, num_experts: int, top_k: int, score_func: str = "softmax",
                 route_norm: bool = False, route_scale: float = 1.0):
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
        else:
            scores = F.softmax(scores.to(torch.float32), dim=1)

        if expert_bias is not None:
            _, selected_experts_indices = torch.topk(
                scores + expert_bias, k=self.top_k, dim=1, sorted=is_grad_enabled()
            )
            top_scores = scores.gather(dim=1, index=selected_experts_indices)
        else:
            top_scores, selected_experts_indices = torch.topk(scores, k=self.top_k, dim=1)

        if self.route_norm:
            denominator = top_scores.sum(dim=-1, keepdim=True) + 1e-20
            top_scores = top_scores / denominator
        top_scores = top_scores * self.route_scale
        num_tokens_per_expert = torch.histc(
            selected_experts_indices.view(-1), bins=self.num_experts, min=0, max=self.num_experts
        )
        return top_scores, selected_experts_indices, num_tokens_per_expert


class MoE(nn.Module):
    def __init__(self, router: TokenChoiceTopKRouter, experts: nn.Module, reorderer: nn.Module,
                 score_before_experts: bool = True):
        super().__init__()
        self.router = router
        self.experts = experts
        self.reorderer = reorderer
        self.score_before_experts = score_before_experts
        self.register_buffer("expert_bias", torch.zeros(router.num_experts), persistent=True)
        self.register_buffer("tokens_per_expert", torch.zeros(router.num_experts), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bs, slen, dim = x.shape
        x = x.view(-1, dim)
        top_scores, selected_experts_indices, num_tokens_per_expert = self.router(x, self.expert_bias)
        if is_grad_enabled():
            with torch.no_grad():
                self.tokens_per_expert.add_(num_tokens_per_expert)

        top_scores_sorted, token_indices_sorted, num_tokens_per_expert = self.reorderer(
            top_scores, selected_experts_indices
        )
        token_indices_sorted = token_indices_sorted.reshape(-1, 1).expand(-1, dim)
        routed_input = torch.gather(x, dim=0, index=token_indices_sorted)

        if not is_grad_enabled() or self.score_before_experts:
            routed_input = (routed_input.to(torch.float32) * top_scores_sorted.reshape(-1, 1)).to(x.dtype)
            routed_output = self.experts(routed_input, num_tokens_per_expert)
        else:
            routed_output = self.experts(routed_input, num_tokens_per_expert)
            routed_output = (routed_output.to(torch.float32) * top_scores_sorted.reshape(-1, 1)).to(x.dtype)

        out = torch.zeros_like(x).scatter_add(dim=0, index=token_indices_sorted, src=routed_output)
        return out.reshape(bs, slen, dim)
