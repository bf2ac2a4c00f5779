# adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/router.py
from abc import ABC, abstractmethod
from functools import partial
from typing import Callable, Optional

import torch

from megatron.core.transformer.module import MegatronModule
from megatron.core.transformer.transformer_config import TransformerConfig

from .moe_utils import (
    MoEAuxLossAutoScaler,
    TopKRoutingOptions,
    switch_load_balancing_loss_func,
    topk_softmax_with_capacity,
    z_loss_func,
)


class Router(ABC, MegatronModule):
    """Base Router class"""

    def __init__(self, config: TransformerConfig, model_comm_pgs=None) -> None:
        super().__init__(config)
        self.config = config
        self.num_experts = self.config.num_moe_experts
        self.moe_aux_loss_func = None
        self.layer_number = None
        self.tp_cp_group = model_comm_pgs.tp_cp
        self.weight = torch.nn.Parameter(
            torch.empty((self.config.num_moe_experts, self.config.hidden_size), dtype=torch.float32)
        )
        self.reset_parameters()

    def reset_parameters(self):
        """Reset the router parameters."""
        if self.config.perform_initialization:
            self.config.init_method(self.weight)
        self.weight.data = self.weight.data.to(dtype=self.config.params_dtype)
        setattr(self.weight, "sequence_parallel", self.config.sequence_parallel)

    def gating(self, input: torch.Tensor):
        """Forward pass of the router gate."""
        if self.weight.device.type == "cpu":
            self.weight.data = self.weight.data.to(device=torch.cuda.current_device())
        router_dtype = input.dtype
        if self.config.moe_router_dtype == "fp32":
            router_dtype = torch.float32
        elif self.config.moe_router_dtype == "fp64":
            router_dtype = torch.float64
        logits = torch.nn.functional.linear(input.to(router_dtype), self.weight.to(router_dtype))
        return logits

    @abstractmethod
    def routing(self, logits: torch.Tensor):
        raise NotImplementedError("Routing function not implemented.")

    @abstractmethod
    def forward(self, input: torch.Tensor):
        raise NotImplementedError("Forward function not implemented.")

    def set_layer_number(self, layer_number: int):
        self.layer_number = layer_number


class TopKRouter(Router):
    """Route each token to the top-k experts."""

    def __init__(self, config: TransformerConfig, model_comm_pgs=None) -> None:
        super().__init__(config=config, model_comm_pgs=model_comm_pgs)
        self.topk = self.config.moe_router_topk
        self.routing_type = self.config.moe_router_load_balancing_type
        self.score_function = self.config.moe_router_score_function
        self.input_jitter = None
        self.enable_expert_bias = self.config.moe_router_enable_expert_bias
        if self.enable_expert_bias:
            self.register_buffer(
                "local_tokens_per_expert",
                torch.zeros(self.config.num_moe_experts, dtype=torch.float32),
                persistent=False,
            )
            self.register_buffer("expert_bias", torch.zeros(self.config.num_moe_experts, dtype=torch.float32))
        else:
            self.local_tokens_per_expert = None
            self.expert_bias = None

    def compute_routing_scores_for_aux_loss(self, logits: torch.Tensor):
        if self.score_function == "softmax":
            scores = torch.softmax(logits, dim=-1, dtype=torch.float32)
        elif self.score_function == "sigmoid":
            scores = torch.sigmoid(logits)
            scores = scores / (scores.sum(dim=-1, keepdim=True) + 1e-20)
        else:
            raise ValueError(f"Invalid score_function: {self.score_function}")
        _, top_indices = torch.topk(scores, k=self.topk, dim=1)
        topk_map = torch.zeros_like(logits).int().scatter(1, top_indices, 1).bool()
        return scores, topk_map

    def _routing_options(self) -> TopKRoutingOptions:
        return TopKRoutingOptions(
            capacity_factor=self.config.moe_expert_capacity_factor,
            pad_to_capacity=self.config.moe_pad_expert_input_to_capacity,
            drop_policy=self.config.moe_token_drop_policy,
            use_pre_softmax=self.config.moe_router_pre_softmax,
            score_function=self.score_function,
            sorted_topk=torch.is_grad_enabled(),
        )

    def aux_loss_load_balancing(self, logits: torch.Tensor):
        probs, routing_map, tokens_per_expert = topk_softmax_with_capacity(
            logits, self.topk, self._routing_options(), expert_bias=self.expert_bias
        )

        if self.training and torch.is_grad_enabled():
            # Apply auxiliary load balancing loss
            # Skip auxiliary loss calculations when using torch.no_grad() or checkpointing.
            scores, loss_routing_map = self.compute_routing_scores_for_aux_loss(logits)
            aux_loss_func = partial(
                switch_load_balancing_loss_func,
                probs=scores,
                tokens_per_expert=loss_routing_map.sum(dim=0),
                topk=self.topk,
            )
            probs = self.apply_load_balancing_loss(activation=probs, load_balancing_loss_func=aux_loss_func)
        return probs, routing_map

    def apply_load_balancing_loss(self, activation: torch.Tensor, load_balancing_loss_func: Callable):
        """Calculate auxiliary loss, attach gradient function to activation and add to logging."""
        moe_aux_loss_coeff = self.config.moe_aux_loss_coeff
        if moe_aux_loss_coeff == 0:
            return activation
        aux_loss = load_balancing_loss_func(
            moe_aux_loss_coeff=moe_aux_loss_coeff,
            total_num_tokens=activation.shape[0],
            num_experts=self.num_experts,
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
        return logits

    def apply_input_jitter(self, input: torch.Tensor):
        """Add noise to the input tensor.
        Refer to https://arxiv.org/abs/2101.03961.
        """
        if self.config.moe_input_jitter_eps is not None and torch.is_grad_enabled():
            eps = self.config.moe_input_jitter_eps
            if self.input_jitter is None:
                self.input_jitter = torch.distributions.uniform.Uniform(
                    torch.tensor(1.0 - eps, dtype=input.dtype, device=input.device),
                    torch.tensor(1.0 + eps, dtype=input.dtype, device=input.device),
                ).rsample
            return input * self.input_jitter(input.shape)
        else:
            return input

    def routing(self, logits: torch.Tensor):
        logits = logits.view(-1, self.config.num_moe_experts)
        logits = self.apply_z_loss(logits)
        if self.routing_type == "aux_loss":
            scores, routing_map = self.aux_loss_load_balancing(logits)
        elif self.routing_type == "none":
            scores, routing_map, _ = topk_softmax_with_capacity(
                logits, self.topk, self._routing_options(), expert_bias=self.expert_bias
            )
        else:
            raise ValueError(f"Unsupported MoE routing type: {self.routing_type}")
        if self.enable_expert_bias:
            with torch.no_grad():
                self.local_tokens_per_expert += routing_map.sum(dim=0)
        return scores, routing_map

    def forward(self, input: torch.Tensor):
        self._maintain_float32_expert_bias()
        input = self.apply_input_jitter(input)
        logits = self.gating(input)
        scores, routing_map = self.routing(logits)
        return scores, routing_map

    def _maintain_float32_expert_bias(self):
        if hasattr(self, "expert_bias") and self.expert_bias is not None:
            if self.expert_bias.dtype != torch.float32:
                self.expert_bias.data = self.expert_bias.data.to(torch.float32)
