import torch

from megatron.core.transformer.moe.moe_utils import (
    MoEAuxLossAutoScaler,
    save_to_aux_losses_tracker,
    switch_load_balancing_loss_func,
    topk_softmax_with_capacity,
    z_loss_func,
)
from megatron.core import parallel_state


class TopKRouter(torch.nn.Module):

    def __init__(self, config, layer_number=None):
        super().__init__()
        self.config = config
        self.topk = config.moe_router_topk
        self.num_experts = config.num_moe_experts
        self.layer_number = layer_number
        self.weight = torch.nn.Parameter(torch.empty((self.num_experts, config.hidden_size), dtype=torch.float32))

    def gating(self, input):
        router_dtype = torch.float32 if torch.is_grad_enabled() else input.dtype
        if self.config.moe_router_dtype == "fp64":
            router_dtype = torch.float64
        return torch.nn.functional.linear(input.to(router_dtype), self.weight.to(router_dtype))

    def apply_z_loss(self, logits):
        if self.config.moe_z_loss_coeff is not None and self.training and torch.is_grad_enabled():
            moe_z_loss_coeff = self.config.moe_z_loss_coeff / parallel_state.get_tensor_and_context_parallel_world_size()
            z_loss = z_loss_func(logits, moe_z_loss_coeff)
            logits = MoEAuxLossAutoScaler.apply(logits, z_loss)
            save_to_aux_losses_tracker("z_loss", z_loss / moe_z_loss_coeff, self.layer_number,
                                       self.config.num_layers)
        return logits

    def aux_loss_load_balancing(self, logits):
        probs, routing_map, tokens_per_expert = topk_softmax_with_capacity(
            logits,
            self.topk,
            capacity_factor=self.config.moe_expert_capacity_factor,
            pad_to_capacity=self.config.moe_pad_expert_input_to_capacity,
            drop_policy=self.config.moe_token_drop_policy,
        )
        if self.training and torch.is_grad_enabled():
            scores = torch.softmax(logits, dim=-1, dtype=torch.float32)
            aux_loss = switch_load_balancing_loss_func(
                probs=scores,
                tokens_per_expert=tokens_per_expert,
                topk=self.topk,
                moe_aux_loss_coeff=self.config.moe_aux_loss_coeff,
            )
            probs = MoEAuxLossAutoScaler.apply(probs, aux_loss)
        return probs, routing_map

    def forward(self, input):
        logits = self.gating(input)
        logits = logits.view(-1, self.num_experts)
        logits = self.apply_z_loss(logits)
        return self.aux_loss_load_balancing(logits)
