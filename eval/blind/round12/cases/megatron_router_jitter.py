# adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/router.py
from functools import partial

import torch

from megatron.core.transformer.moe.moe_utils import (
    MoEAuxLossAutoScaler,
    save_to_aux_losses_tracker,
    switch_load_balancing_loss_func,
    topk_softmax_with_capacity,
    z_loss_func,
)


class TopKRouter(torch.nn.Module):
    def __init__(self, config, layer_number, tp_cp_group):
        super().__init__()
        self.config = config
        self.topk = config.moe_router_topk
        self.layer_number = layer_number
        self.tp_cp_group = tp_cp_group
        self.input_jitter = None
        self.enable_expert_bias = config.moe_router_enable_expert_bias
        self.weight = torch.nn.Parameter(torch.empty(config.num_moe_experts, config.hidden_size))
        self.register_buffer("local_tokens_per_expert", torch.zeros(config.num_moe_experts))

    def apply_z_loss(self, logits):
        if self.config.moe_z_loss_coeff is not None and self.training and torch.is_grad_enabled():
            moe_z_loss_coeff = self.config.moe_z_loss_coeff / self.tp_cp_group.size()
            z_loss = z_loss_func(logits, moe_z_loss_coeff)
            logits = MoEAuxLossAutoScaler.apply(logits, z_loss)
            save_to_aux_losses_tracker(
                "z_loss", z_loss / moe_z_loss_coeff, self.layer_number, self.config.num_layers
            )
        return logits

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

    def aux_loss_load_balancing(self, logits: torch.Tensor):
        probs, routing_map, tokens_per_expert = topk_softmax_with_capacity(
            logits,
            self.topk,
            capacity_factor=self.config.moe_expert_capacity_factor,
            use_pre_softmax=self.config.moe_router_pre_softmax,
        )
        if self.training and torch.is_grad_enabled():
            aux_loss_func = partial(
                switch_load_balancing_loss_func,
                probs=torch.softmax(logits, dim=-1, dtype=torch.float32),
                tokens_per_expert=tokens_per_expert,
                topk=self.topk,
            )
            aux_loss = aux_loss_func(moe_aux_loss_coeff=self.config.moe_aux_loss_coeff)
            probs = MoEAuxLossAutoScaler.apply(probs, aux_loss)
        return probs, routing_map

    def routing(self, logits: torch.Tensor):
        logits = logits.view(-1, self.config.num_moe_experts)
        logits = self.apply_z_loss(logits)
        scores, routing_map = self.aux_loss_load_balancing(logits)
        if self.enable_expert_bias and torch.is_grad_enabled():
            with torch.no_grad():
                self.local_tokens_per_expert += routing_map.sum(dim=0)
        return scores, routing_map

    def forward(self, input: torch.Tensor):
        input = self.apply_input_jitter(input)
        logits = torch.nn.functional.linear(input, self.weight)
        return self.routing(logits)
