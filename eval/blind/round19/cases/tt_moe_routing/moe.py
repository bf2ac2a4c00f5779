# adapted from pytorch/torchtitan torchtitan/models/moe.py
import torch
from torch import nn

from .decision import decide_routing
from .router import TokenChoiceTopKRouter


class MoE(nn.Module):
    def __init__(self, moe_args, dim: int, hidden_dim: int):
        super().__init__()
        num_experts = moe_args.num_experts
        self.experts = moe_args.build_experts(dim, hidden_dim)
        self.router = TokenChoiceTopKRouter(
            dim=dim,
            num_experts=num_experts,
            top_k=moe_args.top_k,
            score_func=moe_args.score_func,
            route_norm=moe_args.route_norm,
            route_scale=moe_args.route_scale,
        )
        self.load_balance_coeff = moe_args.load_balance_coeff
        if self.load_balance_coeff is not None:
            assert self.load_balance_coeff > 0.0
            self.register_buffer(
                "expert_bias",
                torch.zeros(num_experts, dtype=torch.float32),
                persistent=True,
            )
        else:
            self.expert_bias = None
        # tokens_per_expert will be used to update the expert bias for load balancing
        self.register_buffer(
            "tokens_per_expert",
            torch.zeros(num_experts, dtype=torch.float32),
            persistent=False,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bs, slen, dim = x.shape
        x = x.view(-1, dim)
        decision = decide_routing()

        top_scores, selected_experts_indices, num_tokens_per_expert = self.router(
            x, self.expert_bias, decision
        )

        # tokens_per_expert is consumed by the optimizer pre-step hook, never by forward
        if decision.use_bias_routing:
            with torch.no_grad():
                self.tokens_per_expert.add_(num_tokens_per_expert)

        out = self.experts(x, selected_experts_indices, top_scores, num_tokens_per_expert)
        return out.reshape(bs, slen, dim)
