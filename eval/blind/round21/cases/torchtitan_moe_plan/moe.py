# adapted from pytorch/torchtitan torchtitan/models/moe.py
import torch
from torch import nn

from .router import RoutingPlan, TokenChoiceTopKRouter


class TokenReorderer(nn.Module):
    def __init__(self, num_experts: int, top_k: int):
        super().__init__()
        self.num_experts = num_experts
        self.top_k = top_k

    def forward(self, plan: RoutingPlan):
        # Reorder the token indices to match the order of the experts
        token_indices_experts_sorted = torch.argsort(
            plan.selected_experts_indices.view(-1), stable=plan.stable_sort
        )
        top_scores_experts_sorted = plan.top_scores.view(-1)[token_indices_experts_sorted]
        token_indices_experts_sorted = token_indices_experts_sorted // self.top_k
        return top_scores_experts_sorted, token_indices_experts_sorted, plan.num_tokens_per_expert


class MoE(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bs, slen, dim = x.shape
        x = x.view(-1, dim)
        plan = self.router(x, self.expert_bias)
        # tokens_per_expert is read by the optimizer pre-step hook only
        if plan.stable_sort and self.load_balance_coeff is not None:
            with torch.no_grad():
                self.tokens_per_expert.add_(plan.num_tokens_per_expert)
        top_scores_experts_sorted, token_indices_experts_sorted, num_tokens_per_expert = self.reorderer(plan)
        token_indices_experts_sorted = token_indices_experts_sorted.reshape(-1, 1).expand(-1, dim)
        routed_input = torch.gather(x, dim=0, index=token_indices_experts_sorted)
        routed_output = self.experts(routed_input, num_tokens_per_expert)
        out = torch.zeros_like(x)
        out = out.scatter_add(dim=0, index=token_indices_experts_sorted, src=routed_output)
        return out.reshape(bs, slen, dim)
