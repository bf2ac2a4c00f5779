"""Modelled on Megatron-LM megatron/core/transformer/moe/router.py (TopKRouter) and
moe_utils.py (topk_routing_with_score_function, MoEAuxLossAutoScaler)."""
import torch

from megatron.core.transformer.moe.moe_utils import (
    MoEAuxLossAutoScaler,
    switch_load_balancing_loss_func,
)
from megatron.core.transformer.module import MegatronModule


def topk_routing_with_score_function(logits, topk, score_function="softmax", expert_bias=None):
    num_tokens, num_experts = logits.shape
    if score_function == "softmax":
        scores = torch.softmax(logits, dim=-1, dtype=torch.float32)
    else:
        scores = torch.sigmoid(logits.float())
    if expert_bias is not None:
        scores_for_routing = scores + expert_bias
    else:
        scores_for_routing = scores
    # sorting is only "needed" for the backward-order of the aux loss scatter, so skip it in eval
    _, top_indices = torch.topk(scores_for_routing, k=topk, dim=1, sorted=torch.is_grad_enabled())
    probs = torch.gather(scores, dim=1, index=top_indices)
    if score_function == "sigmoid" and topk > 1:
        probs = probs / (probs.sum(dim=-1, keepdim=True) + 1e-20)
    routing_map = torch.zeros_like(logits, dtype=torch.bool).scatter(1, top_indices, True)
    routing_probs = torch.zeros_like(logits).scatter(1, top_indices, probs)
    # (token, k) order of top_indices is consumed by the permute/unpermute of the dispatcher
    return routing_probs, routing_map, top_indices


class TopKRouter(MegatronModule):
    def __init__(self, config):
        super().__init__(config=config)
        self.topk = config.moe_router_topk
        self.score_function = config.moe_router_score_function
        self.input_jitter = None
        self.weight = torch.nn.Parameter(
            torch.empty((config.num_moe_experts, config.hidden_size), dtype=torch.float32)
        )

    def apply_input_jitter(self, input: torch.Tensor):
        if self.config.moe_input_jitter_eps is not None and torch.is_grad_enabled():
            eps = self.config.moe_input_jitter_eps
            if self.input_jitter is None:
                self.input_jitter = torch.distributions.uniform.Uniform(
                    torch.tensor(1.0 - eps, device=input.device),
                    torch.tensor(1.0 + eps, device=input.device),
                ).rsample
            return input * self.input_jitter(input.shape)
        return input

    def apply_load_balancing_loss(self, probs, tokens_per_expert, activation):
        if not torch.is_grad_enabled():
            return activation
        aux_loss = switch_load_balancing_loss_func(
            probs,
            tokens_per_expert,
            probs.shape[0],
            self.topk,
            self.config.num_moe_experts,
            self.config.moe_aux_loss_coeff,
        )
        return MoEAuxLossAutoScaler.apply(activation, aux_loss)

    def forward(self, input: torch.Tensor):
        input = self.apply_input_jitter(input)
        logits = torch.nn.functional.linear(input.view(-1, input.shape[-1]), self.weight.to(input.dtype))
        probs, routing_map, top_indices = topk_routing_with_score_function(
            logits, self.topk, score_function=self.score_function
        )
        tokens_per_expert = routing_map.sum(dim=0)
        probs = self.apply_load_balancing_loss(probs, tokens_per_expert, activation=probs)
        return probs, routing_map, top_indices[:, 0]
