# adapted from pytorch/torchtitan torchtitan/models/moe/moe.py
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from .utils import indices_padding_wrapper


@dataclass
class MoEArgs:
    num_experts: int = 8
    num_shared_experts: int = 1
    score_func: Literal["softmax", "sigmoid"] = "sigmoid"
    route_norm: bool = False
    route_scale: float = 1.0
    score_before_experts: bool = True
    top_k: int = 1
    use_grouped_mm: bool = True  # grouped mm or for-loop for the experts computation
    load_balance_coeff: float | None = 1e-3


def _run_experts_for_loop(w1, w2, w3, x, num_tokens_per_expert):
    num_tokens_per_expert = num_tokens_per_expert.tolist()
    out_experts_splits = []
    for expert_idx, x_expert in enumerate(torch.split(x, num_tokens_per_expert, dim=0)):
        h = F.silu(torch.matmul(x_expert, w1[expert_idx].transpose(-2, -1)))
        h = h * torch.matmul(x_expert, w3[expert_idx].transpose(-2, -1))
        out_experts_splits.append(torch.matmul(h, w2[expert_idx].transpose(-2, -1)))
    return torch.cat(out_experts_splits)


def _run_experts_grouped_mm(w1, w2, w3, x, num_tokens_per_expert):
    offsets = torch.cumsum(num_tokens_per_expert, dim=0, dtype=torch.int32)
    h = F.silu(torch._grouped_mm(x.bfloat16(), w1.bfloat16().transpose(-2, -1), offs=offsets))
    h = h * torch._grouped_mm(x.bfloat16(), w3.bfloat16().transpose(-2, -1), offs=offsets)
    return torch._grouped_mm(h, w2.bfloat16().transpose(-2, -1), offs=offsets).type_as(x)


class GroupedExperts(nn.Module):
    def __init__(self, dim: int, hidden_dim: int, num_experts: int, use_grouped_mm: bool):
        super().__init__()
        self.num_experts = num_experts
        self.w1 = nn.Parameter(torch.empty(num_experts, hidden_dim, dim))
        self.w2 = nn.Parameter(torch.empty(num_experts, dim, hidden_dim))
        self.w3 = nn.Parameter(torch.empty(num_experts, hidden_dim, dim))
        self.use_grouped_mm = use_grouped_mm

    def forward(self, x: torch.Tensor, num_tokens_per_expert: torch.Tensor) -> torch.Tensor:
        use_grouped_mm = self.use_grouped_mm and torch.is_grad_enabled()
        if use_grouped_mm:
            run_experts_fn = indices_padding_wrapper(_run_experts_grouped_mm)
        else:
            run_experts_fn = _run_experts_for_loop
        return run_experts_fn(self.w1, self.w2, self.w3, x, num_tokens_per_expert)


class MoE(nn.Module):
    def __init__(self, moe_args: MoEArgs, dim: int, hidden_dim: int):
        super().__init__()
        self.experts = GroupedExperts(dim, hidden_dim, moe_args.num_experts, moe_args.use_grouped_mm)
        self.load_balance_coeff = moe_args.load_balance_coeff
        self.register_buffer("tokens_per_expert", torch.zeros(moe_args.num_experts, dtype=torch.float32),
                             persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bs, slen, dim = x.shape
        x = x.view(-1, dim)
        top_scores, selected_experts_indices, num_tokens_per_expert = self.router(x, self.expert_bias)
        # tokens_per_expert is consumed by the optimizer-step hook that updates expert_bias
        if torch.is_grad_enabled() and self.load_balance_coeff is not None:
            with torch.no_grad():
                self.tokens_per_expert.add_(num_tokens_per_expert)
        (top_scores_experts_sorted, token_indices_experts_sorted, num_tokens_per_expert) = self.reorderer(
            top_scores, selected_experts_indices)
        routed_input = x[token_indices_experts_sorted // self.router.top_k]
        routed_output = self.experts(routed_input, num_tokens_per_expert)
        out = torch.zeros_like(x)
        out.scatter_add_(0, token_indices_experts_sorted.reshape(-1, 1).expand(-1, dim), routed_output)
        return out.reshape(bs, slen, dim)
