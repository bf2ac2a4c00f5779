# adapted from pytorch/torchtitan torchtitan/models/moe.py
import torch
from torch import nn


def _record_grad_mode(module: nn.Module, args):
    # consulted later by the expert-parallel input/output hooks
    module._ep_overlap_dispatch = torch.is_grad_enabled()


class GroupedExperts(nn.Module):
    def __init__(self, dim: int, hidden_dim: int, num_experts: int, use_grouped_mm: bool):
        super().__init__()
        self.num_experts = num_experts
        self.w1 = nn.Parameter(torch.empty(num_experts, hidden_dim, dim))
        self.w2 = nn.Parameter(torch.empty(num_experts, dim, hidden_dim))
        self.w3 = nn.Parameter(torch.empty(num_experts, hidden_dim, dim))
        self.use_grouped_mm = use_grouped_mm
        self.register_forward_pre_hook(_record_grad_mode, prepend=True)


class MoE(nn.Module):
    def __init__(self, moe_args, dim: int, hidden_dim: int):
        super().__init__()
        num_experts = moe_args.num_experts
        self.experts = GroupedExperts(dim=dim, hidden_dim=hidden_dim, num_experts=num_experts,
                                      use_grouped_mm=moe_args.use_grouped_mm)
        self.register_buffer("tokens_per_expert", torch.zeros(num_experts, dtype=torch.float32), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bs, slen, dim = x.shape
        x = x.view(-1, dim)
        top_scores, selected_experts_indices, num_tokens_per_expert = self.router(x, self.expert_bias)
        # tokens_per_expert is consumed by the optimizer step pre-hook only
        if torch.is_grad_enabled():
            with torch.no_grad():
                self.tokens_per_expert.add_(num_tokens_per_expert)
        top_scores_experts_sorted, token_indices_experts_sorted, num_tokens_per_expert = self.reorderer(
            top_scores, selected_experts_indices
        )
        routed_input = x[token_indices_experts_sorted // self.router.top_k]
        routed_output = self.experts(routed_input, num_tokens_per_expert)
        out = torch.zeros_like(x)
        out.scatter_add_(0, token_indices_experts_sorted.unsqueeze(-1).expand(-1, dim), routed_output)
        return out.reshape(bs, slen, dim)
