from typing import NamedTuple, Optional

import torch

from megatron.core.transformer.moe.moe_utils import MoEAuxLossAutoScaler, switch_load_balancing_loss_func, topk_softmax_with_capacity


class RoutingResult(NamedTuple):
    probs: torch.Tensor
    routing_map: torch.Tensor
    needs_backward: bool


class TopKRouter(torch.nn.Module):
    def __init__(self, config) -> None:
        super().__init__()
        self.config = config
        self.topk = config.moe_router_topk
        self.weight = torch.nn.Parameter(torch.empty(config.num_moe_experts, config.hidden_size))
        self.input_jitter = None

    def apply_input_jitter(self, input: torch.Tensor, needs_backward: bool):
        if self.config.moe_input_jitter_eps is not None and needs_backward:
            eps = self.config.moe_input_jitter_eps
            if self.input_jitter is None:
                self.input_jitter = torch.distributions.uniform.Uniform(
                    torch.tensor(1.0 - eps, device=input.device), torch.tensor(1.0 + eps, device=input.device)
                ).rsample
            return input * self.input_jitter(input.shape)
        return input

    def gating(self, input: torch.Tensor, needs_backward: bool):
        router_dtype = torch.float32 if needs_backward else input.dtype
        return torch.nn.functional.linear(input.to(router_dtype), self.weight.to(router_dtype))

    def forward(self, input: torch.Tensor) -> RoutingResult:
        needs_backward = torch.is_grad_enabled()
        input = self.apply_input_jitter(input, needs_backward)
        logits = self.gating(input, needs_backward).view(-1, self.config.num_moe_experts)
        probs, routing_map, tokens_per_expert = topk_softmax_with_capacity(logits, self.topk)
        if self.training and needs_backward and self.config.moe_aux_loss_coeff > 0:
            aux_loss = switch_load_balancing_loss_func(probs, tokens_per_expert, self.topk, self.config.moe_aux_loss_coeff)
            probs = MoEAuxLossAutoScaler.apply(probs, aux_loss)
        return RoutingResult(probs, routing_map, needs_backward)
