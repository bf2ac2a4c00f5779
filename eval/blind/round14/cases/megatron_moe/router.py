# adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/router.py
from functools import partial
from typing import Callable

import torch

from megatron.core.transformer.module import MegatronModule
from megatron.core.transformer.moe.moe_logging import save_to_aux_losses_tracker

from .moe_utils import (
    MoEAuxLossAutoScaler,
    switch_load_balancing_loss_func,
    topk_routing_with_score_function,
    z_loss_func,
)


class TopKRouter(MegatronModule):
    """Route each token to the top-k experts."""

    def __init__(self, config, pg_collection=None) -> None:
        super().__init__(config)
        self.config = config
        self.num_experts = config.num_moe_experts
        self.topk = config.moe_router_topk
        self.routing_type = config.moe_router_load_balancing_type
        self.score_function = config.moe_router_score_function
        self.input_jitter = None
        self.layer_number = None
        self.tp_cp_group = pg_collection.tp_cp
        self.weight = torch.nn.Parameter(torch.empty((self.config.num_moe_experts, self.config.hidden_size)))
        self.enable_expert_bias = config.moe_router_enable_expert_bias
        if self.enable_expert_bias:
            self.register_buffer("expert_bias", torch.zeros(self.config.num_moe_experts, dtype=torch.float32))
        else:
            self.expert_bias = None

    def gating(self, input: torch.Tensor):
        logits = torch.nn.functional.linear(input, self.weight.to(input.dtype))
        return logits

    def compute_routing_scores_for_aux_loss(self, logits: torch.Tensor):
        scores = torch.softmax(logits, dim=-1, dtype=torch.float32)
        _, top_indices = torch.topk(scores, k=self.topk, dim=1)
        routing_map = torch.zeros_like(logits).int().scatter(1, top_indices, 1).bool()
        return scores, routing_map

    def aux_loss_load_balancing(self, logits: torch.Tensor):
        """Apply auxiliary loss-based load balancing to the logits tensor."""
        probs, routing_map = topk_routing_with_score_function(
            logits,
            self.topk,
            use_pre_softmax=self.config.moe_router_pre_softmax,
            num_groups=self.config.moe_router_num_groups,
            group_topk=self.config.moe_router_group_topk,
            scaling_factor=self.config.moe_router_topk_scaling_factor,
            score_function=self.score_function,
            expert_bias=self.expert_bias,
        )

        if self.training and torch.is_grad_enabled():
            # Apply auxiliary load balancing loss
            # Skip auxiliary loss calculations when using torch.no_grad() or checkpointing.
            scores, loss_routing_map = self.compute_routing_scores_for_aux_loss(logits)
            aux_loss_func = partial(
                switch_load_balancing_loss_func,
                probs=scores,
                tokens_per_expert=loss_routing_map.sum(dim=0),
                total_num_tokens=loss_routing_map.shape[0],
                topk=self.topk,
                num_experts=self.num_experts,
            )
            probs = self.apply_load_balancing_loss(activation=probs, load_balancing_loss_func=aux_loss_func)
        return probs, routing_map

    def apply_load_balancing_loss(self, activation: torch.Tensor, load_balancing_loss_func: Callable):
        """Calculate auxiliary loss, attach gradient function to activation and add to logging."""
        moe_aux_loss_coeff = self.config.moe_aux_loss_coeff
        if moe_aux_loss_coeff == 0:
            return activation
        aux_loss = load_balancing_loss_func(moe_aux_loss_coeff=moe_aux_loss_coeff)
        save_to_aux_losses_tracker(
            "load_balancing_loss", aux_loss / moe_aux_loss_coeff, self.layer_number, self.config.num_layers
        )
        activation = MoEAuxLossAutoScaler.apply(activation, aux_loss)
        return activation

    def apply_z_loss(self, logits):
        """Encourages the router's logits to remain small to enhance stability."""
        if self.config.moe_z_loss_coeff is not None and self.training and torch.is_grad_enabled():
            # Skip Z loss calculations when using torch.no_grad() or checkpointing.
            moe_z_loss_coeff = self.config.moe_z_loss_coeff / self.tp_cp_group.size()
            z_loss = z_loss_func(logits, moe_z_loss_coeff)
            logits = MoEAuxLossAutoScaler.apply(logits, z_loss)
            save_to_aux_losses_tracker("z_loss", z_loss / moe_z_loss_coeff, self.layer_number, self.config.num_layers)
        return logits

    def apply_input_jitter(self, input: torch.Tensor):
        """Add noise to the input tensor.
        Refer to https://arxiv.org/abs/2101.03961.
        """
        if self.config.moe_input_jitter_eps is not None and torch.is_grad_enabled():
            eps = self.config.moe_input_jitter_eps
            if self.input_jitter is None:
                self.input_jitter = torch.distributions.uniform.Uniform(
                    torch.tensor(1.0 - eps, device=input.device),
                    torch.tensor(1.0 + eps, device=input.device),
                ).rsample
            return input * self.input_jitter(input.shape)
        else:
            return input

    def routing(self, logits: torch.Tensor):
        """Top-k routing function"""
        logits = logits.view(-1, self.config.num_moe_experts)

        # Apply Z-Loss
        logits = self.apply_z_loss(logits)

        if self.routing_type == "aux_loss":
            scores, routing_map = self.aux_loss_load_balancing(logits)
        elif self.routing_type == "none":
            scores, routing_map = topk_routing_with_score_function(
                logits,
                self.topk,
                use_pre_softmax=self.config.moe_router_pre_softmax,
                score_function=self.score_function,
                expert_bias=self.expert_bias,
            )
        else:
            raise ValueError(f"Unsupported MoE routing type: {self.routing_type}")
        return scores, routing_map

    def forward(self, input: torch.Tensor):
        """Forward pass of the router."""
        # Apply input jitter
        input = self.apply_input_jitter(input)
        logits = self.gating(input)
        scores, routing_map = self.routing(logits)
        return scores, routing_map
