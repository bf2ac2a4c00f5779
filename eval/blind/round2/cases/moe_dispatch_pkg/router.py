# Modelled on Megatron-LM megatron/core/transformer/moe/router.py (TopKRouter)
import torch

from megatron.core.transformer.moe.moe_utils import (
    compute_routing_scores_for_aux_loss,
    switch_load_balancing_loss_func,
    topk_routing_with_score_function,
)
from megatron.core.transformer.moe.moe_utils import MoEAuxLossAutoScaler
from megatron.core.transformer.module import MegatronModule


class TopKRouter(MegatronModule):
    def __init__(self, config, pg_collection=None):
        super().__init__(config=config)
        self.topk = config.moe_router_topk
        self.score_function = config.moe_router_score_function
        self.weight = torch.nn.Parameter(torch.empty((config.num_moe_experts, config.hidden_size)))

    def is_aux_loss_enabled(self) -> bool:
        return self.config.moe_aux_loss_coeff not in (None, 0.0)

    def routing(self, logits: torch.Tensor):
        logits = logits.view(-1, self.config.num_moe_experts)
        probs, routing_map = topk_routing_with_score_function(
            logits, self.topk, score_function=self.score_function
        )
        # Apply each aux loss type and attach aux loss autograd function to probs
        if self.training and torch.is_grad_enabled() and self.is_aux_loss_enabled():
            routing_map_for_aux_loss, scores_for_aux_loss = compute_routing_scores_for_aux_loss(
                logits, self.topk, self.score_function
            )
            aux_loss = switch_load_balancing_loss_func(
                probs=scores_for_aux_loss,
                tokens_per_expert=routing_map_for_aux_loss.sum(dim=0),
                total_num_tokens=routing_map_for_aux_loss.shape[0],
                topk=self.topk,
                num_experts=self.config.num_moe_experts,
                moe_aux_loss_coeff=self.config.moe_aux_loss_coeff,
            )
            probs = MoEAuxLossAutoScaler.apply(probs, aux_loss)
        return probs, routing_map

    def forward(self, input: torch.Tensor):
        logits = torch.nn.functional.linear(input, self.weight)
        return self.routing(logits)
