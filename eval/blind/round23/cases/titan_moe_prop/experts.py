# adapted from pytorch/torchtitan torchtitan/models/moe.py
import torch
import torch.nn.functional as F
from torch import nn

from torchtitan.distributed.expert_parallel import indices_padding_wrapper

from .base import GradModeAwareModule
from .router import TokenChoiceTopKRouter


def _run_experts_for_loop(w1, w2, w3, x, num_tokens_per_expert):
    num_tokens_per_expert = num_tokens_per_expert.tolist()
    x = torch.split(x[: sum(num_tokens_per_expert)], split_size_or_sections=num_tokens_per_expert, dim=0)
    outs = []
    for expert_idx, x_expert in enumerate(x):
        h = F.silu(torch.matmul(x_expert, w1[expert_idx].transpose(-2, -1)))
        h = h * torch.matmul(x_expert, w3[expert_idx].transpose(-2, -1))
        outs.append(torch.matmul(h, w2[expert_idx].transpose(-2, -1)))
    return torch.cat(outs, dim=0)


def _run_experts_grouped_mm(w1, w2, w3, x, num_tokens_per_expert):
    offsets = torch.cumsum(num_tokens_per_expert, dim=0, dtype=torch.int32)
    h = F.silu(torch._grouped_mm(x.bfloat16(), w1.bfloat16().transpose(-2, -1), offs=offsets))
    h = h * torch._grouped_mm(x.bfloat16(), w3.bfloat16().transpose(-2, -1), offs=offsets)
    return torch._grouped_mm(h, w2.bfloat16().transpose(-2, -1), offs=offsets).type_as(x)


class GroupedExperts(GradModeAwareModule):
    def __init__(self, dim, hidden_dim, num_experts, use_grouped_mm):
        super().__init__()
        self.w1 = nn.Parameter(torch.empty(num_experts, hidden_dim, dim))
        self.w2 = nn.Parameter(torch.empty(num_experts, dim, hidden_dim))
        self.w3 = nn.Parameter(torch.empty(num_experts, hidden_dim, dim))
        self.use_grouped_mm = use_grouped_mm

    def forward(self, x, num_tokens_per_expert):
        if self.use_grouped_mm and self._is_train_step:
            return indices_padding_wrapper(_run_experts_grouped_mm)(self.w1, self.w2, self.w3, x, num_tokens_per_expert)
        return _run_experts_for_loop(self.w1, self.w2, self.w3, x, num_tokens_per_expert)


class MoE(GradModeAwareModule):
    def __init__(self, moe_args, dim: int, hidden_dim: int):
        super().__init__()
        num_experts = moe_args.num_experts
        self.experts = GroupedExperts(dim, hidden_dim, num_experts, moe_args.use_grouped_mm)
        self.router = TokenChoiceTopKRouter(dim, num_experts, moe_args.top_k, moe_args.score_func,
                                            moe_args.route_norm, moe_args.route_scale)
        self.register_buffer("expert_bias", torch.zeros(num_experts, dtype=torch.float32), persistent=True)
        self.register_buffer("tokens_per_expert", torch.zeros(num_experts, dtype=torch.float32), persistent=False)

    def forward(self, x):
        bs, slen, dim = x.shape
        x = x.view(-1, dim)
        top_scores, selected_experts_indices, num_tokens_per_expert = self.router(x, self.expert_bias)
        # consumed by the optimizer pre-step hook that nudges expert_bias
        if self._is_train_step:
            with torch.no_grad():
                self.tokens_per_expert.add_(num_tokens_per_expert)
        token_indices = torch.argsort(selected_experts_indices.view(-1), stable=True)
        routed_input = x[token_indices // self.router.top_k] * top_scores.view(-1)[token_indices].reshape(-1, 1)
        routed_output = self.experts(routed_input, num_tokens_per_expert)
        out = torch.zeros_like(x).index_add_(0, token_indices // self.router.top_k, routed_output)
        return out.reshape(bs, slen, dim)
