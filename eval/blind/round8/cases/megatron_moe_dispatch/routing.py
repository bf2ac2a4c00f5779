import torch

from megatron.core.transformer.moe.moe_utils import MoEAuxLossAutoScaler, switch_load_balancing_loss_func


def route_tokens(logits, topk, config, fwd_ctx):
    scores = torch.softmax(logits, dim=-1, dtype=torch.float32)
    probs, top_indices = torch.topk(scores, k=topk, dim=-1)
    num_tokens, num_experts = logits.shape
    routing_map = torch.zeros_like(logits, dtype=torch.bool).scatter(1, top_indices, True)
    drop = config.moe_expert_capacity_factor is not None and fwd_ctx["grad"]
    if drop:
        capacity = int(config.moe_expert_capacity_factor * num_tokens * topk / num_experts)
        rank_in_expert = torch.cumsum(routing_map.int(), dim=0) * routing_map
        routing_map = routing_map & (rank_in_expert <= capacity)
    full_probs = torch.zeros_like(scores).scatter(1, top_indices, probs) * routing_map
    if fwd_ctx["grad"] and config.moe_router_load_balancing_type == "aux_loss":
        aux_loss = switch_load_balancing_loss_func(scores, routing_map.sum(dim=0), topk, config.moe_aux_loss_coeff)
        full_probs = MoEAuxLossAutoScaler.apply(full_probs, aux_loss)
    return full_probs, routing_map
