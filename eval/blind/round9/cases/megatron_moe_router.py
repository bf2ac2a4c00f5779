from typing import Optional

import torch

from megatron.core.transformer.moe.moe_utils import (
    MoEAuxLossAutoScaler,
    group_limited_topk,
    switch_load_balancing_loss_func,
)
from megatron.core.transformer.module import MegatronModule


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
                scores=scores,
                topk=topk,
                num_tokens=num_tokens,
                num_experts=num_experts,
                num_groups=num_groups,
                group_topk=group_topk,
            )
        return torch.topk(scores, k=topk, dim=1, sorted=torch.is_grad_enabled())

    if score_function == "softmax":
        if use_pre_softmax:
            scores = torch.softmax(logits, dim=-1, dtype=torch.float32).type_as(logits)
            probs, top_indices = compute_topk(scores, topk, num_groups, group_topk)
        else:
            scores, top_indices = compute_topk(logits, topk, num_groups, group_topk)
            probs = torch.softmax(scores, dim=-1, dtype=torch.float32).type_as(logits)
    elif score_function == "sigmoid":
        scores = torch.sigmoid(logits)
        probs, top_indices = compute_topk(scores, topk, num_groups, group_topk)
        probs = probs / (probs.sum(dim=-1, keepdim=True) + 1e-20) if topk > 1 else probs
    else:
        raise ValueError(f"Invalid score_function: {score_function}")

    if scaling_factor:
        probs = probs * scaling_factor

    routing_probs = torch.zeros_like(logits).scatter(1, top_indices, probs)
    routing_map = torch.zeros_like(logits).int().scatter(1, top_indices, 1).bool()
    return routing_probs, routing_map


class TopKRouter(MegatronModule):
    def __init__(self, config) -> None:
        super().__init__(config=config)
        self.topk = config.moe_router_topk
        self.num_experts = config.num_moe_experts
        self.weight = torch.nn.Parameter(torch.empty((self.num_experts, config.hidden_size)))
        self.input_jitter = None

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

    def gating(self, input: torch.Tensor):
        return torch.nn.functional.linear(input.to(self.weight.dtype), self.weight)

    def aux_loss_load_balancing(self, logits: torch.Tensor):
        probs, routing_map = topk_routing_with_score_function(
            logits,
            self.topk,
            use_pre_softmax=self.config.moe_router_pre_softmax,
            num_groups=self.config.moe_router_num_groups,
            group_topk=self.config.moe_router_group_topk,
            scaling_factor=self.config.moe_router_topk_scaling_factor,
            score_function=self.config.moe_router_score_function,
        )
        if self.training and torch.is_grad_enabled():
            scores = torch.softmax(logits, dim=-1, dtype=torch.float32)
            tokens_per_expert = routing_map.sum(dim=0)
            aux_loss = switch_load_balancing_loss_func(
                probs=scores,
                tokens_per_expert=tokens_per_expert,
                total_num_tokens=logits.shape[0],
                topk=self.topk,
                num_experts=self.num_experts,
                moe_aux_loss_coeff=self.config.moe_aux_loss_coeff,
            )
            probs = MoEAuxLossAutoScaler.apply(probs, aux_loss)
        return probs, routing_map

    def forward(self, input: torch.Tensor):
        input = self.apply_input_jitter(input)
        logits = self.gating(input)
        logits = logits.view(-1, self.num_experts)
        return self.aux_loss_load_balancing(logits)
