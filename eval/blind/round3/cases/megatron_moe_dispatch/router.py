# Modelled on megatron/core/transformer/moe/router.py (Megatron-LM core_r0.12).
from typing import NamedTuple

import torch

from megatron.core.transformer.moe.moe_utils import (
    MoEAuxLossAutoScaler,
    switch_load_balancing_loss_func,
    topk_softmax_with_capacity,
)


class RoutingResult(NamedTuple):
    probs: torch.Tensor
    routing_map: torch.Tensor
    grad_enabled: bool


class TopKRouter(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.topk = config.moe_router_topk
        self.weight = torch.nn.Parameter(torch.empty(config.num_moe_experts, config.hidden_size))

    def forward(self, input: torch.Tensor) -> RoutingResult:
        grad_enabled = torch.is_grad_enabled()
        logits = torch.nn.functional.linear(input, self.weight).view(-1, self.config.num_moe_experts)
        probs, routing_map, tokens_per_expert = topk_softmax_with_capacity(
            logits, self.topk, capacity_factor=self.config.moe_expert_capacity_factor,
            pad_to_capacity=self.config.moe_pad_expert_input_to_capacity,
            drop_policy=self.config.moe_token_drop_policy,
        )
        if grad_enabled and self.training:
            aux_loss = switch_load_balancing_loss_func(
                torch.softmax(logits, dim=-1, dtype=torch.float32), tokens_per_expert, self.topk,
                self.config.moe_aux_loss_coeff,
            )
            probs = MoEAuxLossAutoScaler.apply(probs, aux_loss)
        return RoutingResult(probs, routing_map, grad_enabled)
