# Adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/router.py (TopKRouter.routing)
# and moe_utils.py (topk_routing_with_score_function).
import torch

from .plan import DispatchPlan


class TopKRouter(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.topk = config.moe_router_topk
        self.weight = torch.nn.Parameter(torch.empty(config.num_moe_experts, config.hidden_size))

    def gating(self, input: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(input.float(), self.weight.float())

    def routing(self, logits: torch.Tensor, plan: DispatchPlan):
        logits = logits.view(-1, self.config.num_moe_experts)
        scores, top_indices = torch.topk(logits, k=self.topk, dim=-1, sorted=plan.sorted_topk)
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32)
        routing_probs = torch.zeros_like(logits).scatter(1, top_indices, probs)
        routing_map = torch.zeros_like(logits).int().scatter(1, top_indices, 1).bool()
        return routing_probs, routing_map

    def forward(self, input: torch.Tensor, plan: DispatchPlan):
        logits = self.gating(input)
        return self.routing(logits, plan)
