# adapted from pytorch/torchtitan torchtitan/models/moe/moe.py
import torch
import torch.nn.functional as F
from torch import nn

from . import routing_state
from .routing_state import routing_scope


class TokenReorderer(nn.Module):
    def __init__(self, num_experts: int, top_k: int):
        super().__init__()
        self.num_experts = num_experts
        self.top_k = top_k

    def forward(self, top_scores: torch.Tensor, selected_experts_indices: torch.Tensor):
        num_tokens_per_expert = torch.histc(
            selected_experts_indices.view(-1), bins=self.num_experts, min=0, max=self.num_experts
        )
        _, token_indices_experts_sorted = torch.sort(
            selected_experts_indices.view(-1), stable=routing_state.STATE["grad"]
        )
        top_scores_experts_sorted = top_scores.view(-1)[token_indices_experts_sorted]
        return top_scores_experts_sorted, token_indices_experts_sorted, num_tokens_per_expert


class MoE(nn.Module):
    def __init__(self, moe_args, dim: int, hidden_dim: int):
        super().__init__()
        self.use_grouped_mm = moe_args.use_grouped_mm
        self.load_balance_coeff = moe_args.load_balance_coeff
        self.reorderer = TokenReorderer(num_experts=moe_args.num_experts, top_k=moe_args.top_k)
        self.register_buffer("tokens_per_expert", torch.zeros(moe_args.num_experts, dtype=torch.float32),
                             persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bs, slen, dim = x.shape
        x = x.view(-1, dim)
        with routing_scope() as state:
            top_scores, selected_experts_indices, num_tokens_per_expert = self.router(x, self.expert_bias)
            if state["grad"] and self.load_balance_coeff is not None:
                with torch.no_grad():
                    self.tokens_per_expert.add_(num_tokens_per_expert)
            top_scores_sorted, token_indices_sorted, num_tokens_per_expert = self.reorderer(
                top_scores, selected_experts_indices)
            routed_input = x[token_indices_sorted // self.reorderer.top_k]
            use_grouped_mm = self.use_grouped_mm and state["grad"]
            if use_grouped_mm:
                routed_output = self.experts.grouped_mm_forward(routed_input, num_tokens_per_expert)
            else:
                routed_output = self.experts.for_loop_forward(routed_input, num_tokens_per_expert)
        out = torch.zeros_like(x)
        out.scatter_add_(0, token_indices_sorted.reshape(-1, 1).expand(-1, dim), routed_output)
        return out.reshape(bs, slen, dim)
