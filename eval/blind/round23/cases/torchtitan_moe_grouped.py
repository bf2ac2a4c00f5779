# adapted from pytorch/torchtitan torchtitan/models/moe.py
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import DTensor

from torchtitan.distributed.expert_parallel import indices_padding_wrapper


def _run_experts_for_loop(w1, w2, w3, x, num_tokens_per_expert):
    num_tokens_per_expert = num_tokens_per_expert.tolist()
    num_padding = x.shape[0] - sum(num_tokens_per_expert)
    x = torch.split(x[: sum(num_tokens_per_expert)], split_size_or_sections=num_tokens_per_expert, dim=0)
    out_experts_splits = []
    for expert_idx, x_expert in enumerate(x):
        h = F.silu(torch.matmul(x_expert, w1[expert_idx].transpose(-2, -1)))
        h = h * torch.matmul(x_expert, w3[expert_idx].transpose(-2, -1))
        h = torch.matmul(h, w2[expert_idx].transpose(-2, -1))
        out_experts_splits.append(h)
    out = torch.cat(out_experts_splits, dim=0)
    return torch.vstack((out, out.new_zeros((num_padding, out.shape[-1]))))


def _run_experts_grouped_mm(w1, w2, w3, x, num_tokens_per_expert):
    offsets = torch.cumsum(num_tokens_per_expert, dim=0, dtype=torch.int32)
    h = F.silu(torch._grouped_mm(x.bfloat16(), w1.bfloat16().transpose(-2, -1), offs=offsets))
    h = h * torch._grouped_mm(x.bfloat16(), w3.bfloat16().transpose(-2, -1), offs=offsets)
    return torch._grouped_mm(h, w2.bfloat16().transpose(-2, -1), offs=offsets).type_as(x)


class GroupedExperts(nn.Module):
    def __init__(self, dim, hidden_dim, num_experts, use_grouped_mm):
        super().__init__()
        self.num_experts = num_experts
        self.w1 = nn.Parameter(torch.empty(num_experts, hidden_dim, dim))
        self.w2 = nn.Parameter(torch.empty(num_experts, dim, hidden_dim))
        self.w3 = nn.Parameter(torch.empty(num_experts, hidden_dim, dim))
        self.use_grouped_mm = use_grouped_mm

    def forward(self, x, num_tokens_per_expert):
        if isinstance(self.w1, DTensor):
            w1, w2, w3 = self.w1.to_local(), self.w2.to_local(), self.w3.to_local()
        else:
            w1, w2, w3 = self.w1, self.w2, self.w3
        if self.use_grouped_mm and torch.is_grad_enabled():
            run_experts_fn = indices_padding_wrapper(_run_experts_grouped_mm)
            return run_experts_fn(w1, w2, w3, x, num_tokens_per_expert)
        else:
            return _run_experts_for_loop(w1, w2, w3, x, num_tokens_per_expert)


class TokenReorderer(nn.Module):
    def __init__(self, num_experts: int, top_k: int):
        super().__init__()
        self.num_experts = num_experts
        self.top_k = top_k

    def forward(self, top_scores, selected_experts_indices):
        num_tokens_per_expert = torch.histc(
            selected_experts_indices.view(-1), bins=self.num_experts, min=0, max=self.num_experts,
        )
        token_indices_experts_sorted = torch.argsort(selected_experts_indices.view(-1), stable=torch.is_grad_enabled())
        top_scores_experts_sorted = top_scores.view(-1)[token_indices_experts_sorted]
        token_indices_experts_sorted = token_indices_experts_sorted // self.top_k
        return top_scores_experts_sorted, token_indices_experts_sorted, num_tokens_per_expert


class MoE(nn.Module):
    def __init__(self, moe_args, dim: int, hidden_dim: int):
        super().__init__()
        self.experts = GroupedExperts(dim, hidden_dim, moe_args.num_experts, moe_args.use_grouped_mm)
        self.reorderer = TokenReorderer(num_experts=moe_args.num_experts, top_k=moe_args.top_k)
        self.register_buffer("tokens_per_expert", torch.zeros(moe_args.num_experts, dtype=torch.float32), persistent=False)

    def forward(self, x):
        bs, slen, dim = x.shape
        x = x.view(-1, dim)
        top_scores, selected_experts_indices, num_tokens_per_expert = self.router(x, self.expert_bias)
        # tokens_per_expert is consumed by the optimizer pre-step hook that updates expert_bias
        if torch.is_grad_enabled():
            with torch.no_grad():
                self.tokens_per_expert.add_(num_tokens_per_expert)
        top_scores_sorted, token_indices_sorted, num_tokens_per_expert = self.reorderer(top_scores, selected_experts_indices)
        routed_input = x[token_indices_sorted] * top_scores_sorted.reshape(-1, 1)
        routed_output = self.experts(routed_input, num_tokens_per_expert)
        out = torch.zeros_like(x).scatter_add(0, token_indices_sorted.reshape(-1, 1).expand(-1, dim), routed_output)
        return out.reshape(bs, slen, dim)
