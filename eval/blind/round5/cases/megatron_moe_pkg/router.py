import torch

from megatron.core.transformer.moe.moe_utils import MoEAuxLossAutoScaler, switch_load_balancing_loss_func
from megatron.core.transformer.module import MegatronModule

from .moe_utils import topk_softmax_with_capacity
from .state import current_routing_flags


class TopKRouter(MegatronModule):
    def __init__(self, config):
        super().__init__(config=config)
        self.topk = config.moe_router_topk
        self.weight = torch.nn.Parameter(torch.empty(config.num_moe_experts, config.hidden_size))

    def aux_loss_load_balancing(self, logits, flags):
        probs, routing_map, primary_expert = topk_softmax_with_capacity(
            logits,
            self.topk,
            capacity_factor=self.config.moe_expert_capacity_factor if flags["train"] else None,
            pad_to_capacity=self.config.moe_pad_expert_input_to_capacity,
            drop_policy=self.config.moe_token_drop_policy,
            **flags,
        )
        if flags["train"]:
            scores = torch.softmax(logits, dim=-1, dtype=torch.float32)
            tokens_per_expert = routing_map.sum(dim=0)
            aux_loss = switch_load_balancing_loss_func(
                scores, tokens_per_expert, logits.shape[0], self.topk,
                self.config.num_moe_experts, self.config.moe_aux_loss_coeff,
            )
            probs = MoEAuxLossAutoScaler.apply(probs, aux_loss)
        return probs, routing_map, primary_expert

    def forward(self, input: torch.Tensor):
        flags = current_routing_flags()
        logits = torch.nn.functional.linear(input.view(-1, self.config.hidden_size), self.weight)
        return self.aux_loss_load_balancing(logits, flags)
