# Modelled on megatron/core/transformer/moe/router.py and moe_utils.py (Megatron-LM core_r0.12).
from typing import Optional

import torch

from megatron.core.transformer.moe.moe_utils import (
    MoEAuxLossAutoScaler,
    group_limited_topk,
    sequence_load_balancing_loss_func,
    switch_load_balancing_loss_func,
    z_loss_func,
)


def topk_routing_with_score_function(
    logits: torch.Tensor,
    topk: int,
    use_pre_softmax: bool = False,
    num_groups: Optional[int] = None,
    group_topk: Optional[int] = None,
    scaling_factor: Optional[float] = None,
    score_function: str = "softmax",
):
    num_tokens, num_experts = logits.shape

    def compute_topk(scores, topk, num_groups=None, group_topk=None):
        if group_topk:
            return group_limited_topk(
                scores=scores, topk=topk, num_tokens=num_tokens, num_experts=num_experts,
                num_groups=num_groups, group_topk=group_topk,
            )
        return torch.topk(scores, k=topk, dim=1, sorted=torch.is_grad_enabled())

    if score_function == "softmax":
        if use_pre_softmax:
            scores = torch.softmax(logits, dim=-1, dtype=torch.float32).type_as(logits)
            probs, top_indices = compute_topk(scores, topk, num_groups, group_topk)
        else:
            scores, top_indices = compute_topk(logits, topk, num_groups, group_topk)
            probs = torch.softmax(scores, dim=-1, dtype=torch.float32).type_as(logits)
    else:
        scores = torch.sigmoid(logits)
        probs, top_indices = compute_topk(scores, topk, num_groups, group_topk)
        probs = probs / (probs.sum(dim=-1, keepdim=True) + 1e-20) if topk > 1 else probs
    if scaling_factor:
        probs = probs * scaling_factor
    routing_probs = torch.zeros_like(logits).scatter(1, top_indices, probs)
    routing_map = torch.zeros_like(logits).int().scatter(1, top_indices, 1).bool()
    return routing_probs, routing_map


class TopKRouter(torch.nn.Module):
    def __init__(self, config) -> None:
        super().__init__()
        self.config = config
        self.topk = config.moe_router_topk
        self.routing_type = config.moe_router_load_balancing_type
        self.score_function = config.moe_router_score_function
        self.input_jitter = None
        self.weight = torch.nn.Parameter(torch.empty((config.num_moe_experts, config.hidden_size)))

    def apply_input_jitter(self, input: torch.Tensor):
        eps = self.config.moe_input_jitter_eps
        if eps is not None and torch.is_grad_enabled():
            if self.input_jitter is None:
                self.input_jitter = torch.distributions.uniform.Uniform(
                    torch.tensor(1.0 - eps, device=input.device),
                    torch.tensor(1.0 + eps, device=input.device),
                ).rsample
            return input * self.input_jitter(input.shape)
        return input

    def apply_z_loss(self, logits):
        if self.config.moe_z_loss_coeff is not None and self.training and torch.is_grad_enabled():
            z_loss = z_loss_func(logits, self.config.moe_z_loss_coeff / self.config.tensor_model_parallel_size)
            logits = MoEAuxLossAutoScaler.apply(logits, z_loss)
        return logits

    def aux_loss_load_balancing(self, logits: torch.Tensor):
        probs, routing_map = topk_routing_with_score_function(
            logits, self.topk, use_pre_softmax=self.config.moe_router_pre_softmax,
            num_groups=self.config.moe_router_num_groups, group_topk=self.config.moe_router_group_topk,
            scaling_factor=self.config.moe_router_topk_scaling_factor, score_function=self.score_function,
        )
        if self.training and torch.is_grad_enabled():
            scores = torch.softmax(logits, dim=-1, dtype=torch.float32)
            aux_loss = switch_load_balancing_loss_func(
                probs=scores, tokens_per_expert=routing_map.sum(dim=0), topk=self.topk,
                moe_aux_loss_coeff=self.config.moe_aux_loss_coeff,
            )
            probs = MoEAuxLossAutoScaler.apply(probs, aux_loss)
        return probs, routing_map

    def forward(self, input: torch.Tensor):
        input = self.apply_input_jitter(input)
        logits = torch.nn.functional.linear(input, self.weight)
        logits = logits.view(-1, self.config.num_moe_experts)
        logits = self.apply_z_loss(logits)
        return self.aux_loss_load_balancing(logits)
