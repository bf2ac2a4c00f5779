# adapted from pytorch/torchtitan torchtitan/models/common/moe/moe.py
import torch
import torch.nn as nn

from .router import TokenChoiceTopKRouter
from .token_dispatcher import AllToAllTokenDispatcher


class MoE(nn.Module):
    def __init__(self, dim: int, hidden_dim: int, num_experts: int, top_k: int, experts: nn.Module):
        super().__init__()
        self.router = TokenChoiceTopKRouter(dim, num_experts, top_k)
        self.dispatcher = AllToAllTokenDispatcher(num_experts, top_k)
        self.experts = experts
        self.register_buffer("expert_bias", torch.zeros(num_experts, dtype=torch.float32), persistent=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bs, slen, dim = x.shape
        x_TD = x.view(-1, dim)
        route_kwargs = {"sorted_topk": torch.is_grad_enabled(), "return_probs": True}
        top_scores, selected_experts_indices, num_tokens_per_expert = self.router(
            x_TD, self.expert_bias, **route_kwargs
        )
        self.dispatcher.set_phase(torch.is_grad_enabled())
        routed_input, num_tokens_per_local_expert, metadata = self.dispatcher.dispatch(
            x_TD, top_scores, selected_experts_indices, num_tokens_per_expert
        )
        routed_output = self.experts(routed_input, num_tokens_per_local_expert)
        out = self.dispatcher.combine(routed_output, metadata, x_TD)
        return out.reshape(bs, slen, dim)
