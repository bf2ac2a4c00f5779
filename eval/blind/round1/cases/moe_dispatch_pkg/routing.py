"""Top-k router producing a RoutingResult (modelled on megatron/core/transformer/moe/router.py)."""
from typing import NamedTuple

import torch

from megatron.core.transformer.moe.moe_utils import MoEAuxLossAutoScaler, switch_load_balancing_loss_func

from .config import MoEDispatcherConfig


class RoutingResult(NamedTuple):
    probs: torch.Tensor
    indices: torch.Tensor
    tokens_per_expert: torch.Tensor
    grad_enabled: bool


class TopKRouter(torch.nn.Module):

    def __init__(self, config: MoEDispatcherConfig):
        super().__init__()
        self.config = config
        self.weight = torch.nn.Parameter(torch.empty(config.num_experts, config.hidden_size))

    def forward(self, hidden_states: torch.Tensor) -> RoutingResult:
        logits = torch.nn.functional.linear(hidden_states.view(-1, self.config.hidden_size), self.weight)
        scores = torch.softmax(logits, dim=-1, dtype=torch.float32)
        probs, indices = torch.topk(scores, k=self.config.topk, dim=-1)
        tokens_per_expert = torch.bincount(indices.view(-1), minlength=self.config.num_experts)

        if torch.is_grad_enabled() and self.config.aux_loss_coeff > 0:
            aux_loss = switch_load_balancing_loss_func(
                scores, tokens_per_expert, self.config.topk, self.config.aux_loss_coeff
            )
            probs = MoEAuxLossAutoScaler.apply(probs, aux_loss)

        return RoutingResult(
            probs=probs.type_as(hidden_states),
            indices=indices,
            tokens_per_expert=tokens_per_expert,
            grad_enabled=torch.is_grad_enabled(),
        )
