# Modelled on Megatron-LM core_v0.19.0 megatron/core/transformer/moe/moe_utils.py and router.py
from typing import Optional, Tuple

import torch

from megatron.core.transformer.moe.moe_utils import (
    MoEAuxLossAutoScaler,
    group_limited_topk,
    save_to_aux_losses_tracker,
    z_loss_func,
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
    expert_bias: Optional[torch.Tensor] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    num_tokens, num_experts = logits.shape

    def _compute_topk(scores, topk, num_groups=None, group_topk=None):
        if group_topk:
            return group_limited_topk(
                scores=scores,
                topk=topk,
                num_tokens=num_tokens,
                num_experts=num_experts,
                num_groups=num_groups,
                group_topk=group_topk,
            )
        # Sorting is only paid for in training; decode does not need ordered experts.
        return torch.topk(scores, k=topk, dim=1, sorted=torch.is_grad_enabled())

    if score_function == "softmax":
        if use_pre_softmax:
            scores = torch.softmax(logits, dim=-1, dtype=torch.float32).type_as(logits)
            probs, top_indices = _compute_topk(scores, topk, num_groups, group_topk)
        else:
            scores, top_indices = _compute_topk(logits, topk, num_groups, group_topk)
            probs = torch.softmax(scores, dim=-1, dtype=torch.float32).type_as(logits)
    elif score_function == "sigmoid":
        scores = torch.sigmoid(logits.float()).type_as(logits)
        if expert_bias is not None:
            _, top_indices = _compute_topk(scores + expert_bias, topk, num_groups, group_topk)
            scores = torch.gather(scores, dim=1, index=top_indices).type_as(logits)
        else:
            scores, top_indices = _compute_topk(scores, topk, num_groups, group_topk)
        probs = scores / (scores.sum(dim=-1, keepdim=True) + 1e-20) if topk > 1 else scores
    else:
        raise ValueError(f"Invalid score_function: {score_function}")

    if scaling_factor:
        probs = probs * scaling_factor
    routing_probs = torch.zeros_like(logits).scatter(1, top_indices, probs)
    routing_map = torch.zeros_like(logits).int().scatter(1, top_indices, 1).bool()
    return routing_probs, routing_map


class TopKRouter(MegatronModule):
    def __init__(self, config, layer_number: int, tp_cp_group):
        super().__init__(config=config)
        self.topk = config.moe_router_topk
        self.layer_number = layer_number
        self.tp_cp_group = tp_cp_group
        self.input_jitter = None
        self.enable_expert_bias = config.moe_router_enable_expert_bias
        self.weight = torch.nn.Parameter(torch.empty((config.num_moe_experts, config.hidden_size)))
        self.register_buffer("local_tokens_per_expert", torch.zeros(config.num_moe_experts))
        self.register_buffer("expert_bias", torch.zeros(config.num_moe_experts))

    def apply_input_jitter(self, input: torch.Tensor):
        eps = self.config.moe_input_jitter_eps
        if eps is not None and torch.is_grad_enabled():
            if self.input_jitter is None:
                self.input_jitter = torch.distributions.uniform.Uniform(
                    torch.tensor(1.0 - eps, dtype=input.dtype, device=input.device),
                    torch.tensor(1.0 + eps, dtype=input.dtype, device=input.device),
                ).rsample
            return input * self.input_jitter(input.shape)
        return input

    def apply_z_loss(self, logits: torch.Tensor):
        if self.config.moe_z_loss_coeff is not None and self.training and torch.is_grad_enabled():
            moe_z_loss_coeff = self.config.moe_z_loss_coeff / self.tp_cp_group.size()
            z_loss = z_loss_func(logits, moe_z_loss_coeff)
            logits = MoEAuxLossAutoScaler.apply(logits, z_loss)
            save_to_aux_losses_tracker(
                "z_loss", z_loss / moe_z_loss_coeff, self.layer_number, self.config.num_layers
            )
        return logits

    def _apply_expert_bias(self, routing_map: torch.Tensor):
        # Prevent extra local tokens accumulation on evaluation or activation recomputation
        if self.enable_expert_bias and torch.is_grad_enabled():
            with torch.no_grad():
                self.local_tokens_per_expert += routing_map.sum(dim=0)

    def forward(self, input: torch.Tensor):
        input = self.apply_input_jitter(input)
        logits = torch.nn.functional.linear(input, self.weight)
        logits = logits.view(-1, self.config.num_moe_experts)
        logits = self.apply_z_loss(logits)
        probs, routing_map = topk_routing_with_score_function(
            logits,
            self.topk,
            use_pre_softmax=self.config.moe_router_pre_softmax,
            num_groups=self.config.moe_router_num_groups,
            group_topk=self.config.moe_router_group_topk,
            scaling_factor=self.config.moe_router_topk_scaling_factor,
            score_function=self.config.moe_router_score_function,
            expert_bias=self.expert_bias if self.enable_expert_bias else None,
        )
        self._apply_expert_bias(routing_map)
        return probs, routing_map
