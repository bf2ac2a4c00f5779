# adapted from pytorch/torchtitan torchtitan/models/common/moe/moe.py
from dataclasses import dataclass, field
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from torchtitan.models.common.feed_forward import FeedForward
from torchtitan.models.common.linear import Linear
from torchtitan.protocols.module import Module


class GroupedExperts(Module):
    @dataclass(kw_only=True, slots=True)
    class Config(Module.Config):
        dim: int = field(init=False)
        hidden_dim: int = field(init=False)
        num_experts: int = field(init=False)
        use_grouped_mm: bool = True

    def __init__(self, config: Config):
        super().__init__()
        self.num_experts = config.num_experts
        self.w1 = nn.Parameter(torch.empty(config.num_experts, config.hidden_dim, config.dim))
        self.w2 = nn.Parameter(torch.empty(config.num_experts, config.dim, config.hidden_dim))
        self.w3 = nn.Parameter(torch.empty(config.num_experts, config.hidden_dim, config.dim))
        self.use_grouped_mm = config.use_grouped_mm

    def forward(self, x: torch.Tensor, num_tokens_per_expert: torch.Tensor) -> torch.Tensor:
        offsets = torch.cumsum(num_tokens_per_expert, dim=0, dtype=torch.int32)
        h = F.silu(torch._grouped_mm(x.bfloat16(), self.w1.bfloat16().transpose(-2, -1), offs=offsets))
        h = h * torch._grouped_mm(x.bfloat16(), self.w3.bfloat16().transpose(-2, -1), offs=offsets)
        return torch._grouped_mm(h, self.w2.bfloat16().transpose(-2, -1), offs=offsets).type_as(x)


class TokenChoiceTopKRouter(Module):
    """This class implements token-choice routing."""

    @dataclass(kw_only=True, slots=True)
    class Config(Module.Config):
        dim: int = field(init=False)
        num_experts: int = field(init=False)
        top_k: int = 1
        score_func: Literal["softmax", "sigmoid"] = "sigmoid"
        route_norm: bool = False
        route_scale: float = 1.0
        gate: Linear.Config
        load_balance_coeff: float | None = 1e-3

    def __init__(self, config: Config):
        super().__init__()
        self.gate = config.gate.build(in_features=config.dim, out_features=config.num_experts)
        self.num_experts = config.num_experts
        self.top_k = config.top_k
        self.score_func = config.score_func
        self.route_norm = config.route_norm
        self.route_scale = config.route_scale
        self.load_balance_coeff = config.load_balance_coeff
        if self.load_balance_coeff is not None:
            assert self.load_balance_coeff > 0.0
            self.register_buffer("expert_bias", torch.zeros(config.num_experts, dtype=torch.float32), persistent=True)
        else:
            self.expert_bias = None
        self.register_buffer("tokens_per_expert", torch.zeros(config.num_experts, dtype=torch.float32),
                             persistent=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        # Compute gate in float32 to help stability of expert load balancing.
        with torch.autocast(device_type=x.device.type, dtype=torch.float32):
            scores = self.gate(x)

        if self.score_func == "sigmoid":
            scores = torch.sigmoid(scores)
        elif self.score_func == "softmax":
            scores = F.softmax(scores, dim=1)
        else:
            raise NotImplementedError(f"Unknown score function {self.score_func}")

        # the bias is fit by the load-balancing update during training steps
        scores_for_choice = (
            scores if (self.expert_bias is None or not torch.is_grad_enabled()) else scores + self.expert_bias
        )
        _, selected_experts_indices = torch.topk(scores_for_choice, k=self.top_k, dim=-1, sorted=False)

        # NOTE: The expert_bias is only used for routing. The gating value
        #       top_scores is still derived from the original scores.
        top_scores = scores.gather(dim=1, index=selected_experts_indices)

        if self.route_norm:
            denominator = top_scores.sum(dim=-1, keepdim=True) + 1e-20
            top_scores = top_scores / denominator
        top_scores = top_scores * self.route_scale

        num_tokens_per_expert = torch.histc(
            selected_experts_indices.view(-1), bins=self.num_experts, min=0, max=self.num_experts,
        )

        with torch.no_grad():
            self.tokens_per_expert.add_(num_tokens_per_expert)

        return top_scores, selected_experts_indices, num_tokens_per_expert


class MoE(Module):
    @dataclass(kw_only=True, slots=True)
    class Config(Module.Config):
        dim: int
        hidden_dim: int
        num_experts: int = 8
        router: TokenChoiceTopKRouter.Config
        experts: GroupedExperts.Config
        shared_experts: FeedForward.Config | None = None
        overlap_a2a: bool = False

    def __init__(self, config: Config):
        super().__init__()
        self.router = config.router.build(dim=config.dim, num_experts=config.num_experts)
        self.experts = config.experts.build(dim=config.dim, hidden_dim=config.hidden_dim, num_experts=config.num_experts)
        self.shared_experts = config.shared_experts.build() if config.shared_experts is not None else None
        self.overlap_a2a = config.overlap_a2a

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bs, slen, dim = x.shape
        x = x.view(-1, dim)

        top_scores, selected_experts_indices, num_tokens_per_expert = self.router(x)

        token_indices_experts_sorted = torch.argsort(selected_experts_indices.view(-1), stable=True)
        top_scores_experts_sorted = top_scores.view(-1)[token_indices_experts_sorted]
        token_indices_experts_sorted = token_indices_experts_sorted // self.router.top_k

        token_indices_experts_sorted = token_indices_experts_sorted.reshape(-1, 1).expand(-1, dim)
        routed_input = torch.gather(x, dim=0, index=token_indices_experts_sorted)
        routed_input = (routed_input.to(torch.float32) * top_scores_experts_sorted.reshape(-1, 1)).to(x.dtype)

        self.experts._overlap_a2a = self.overlap_a2a and torch.is_grad_enabled()
        routed_output = self.experts(routed_input, num_tokens_per_expert)

        out = self.shared_experts(x) if self.shared_experts is not None else torch.zeros_like(x)
        out = out.scatter_add(dim=0, index=token_indices_experts_sorted, src=routed_output)
        return out.reshape(bs, slen, dim)
