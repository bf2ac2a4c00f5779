# adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/moe_utils.py
import math
from typing import Optional

import torch

from megatron.core.extensions.transformer_engine import HAVE_TE, fused_topk_with_score_function
from megatron.core.transformer.transformer_config import TransformerConfig


def get_capacity(num_tokens: int, num_experts: int, capacity_factor: float, min_capacity: Optional[int] = None) -> int:
    capacity = math.ceil((num_tokens / num_experts) * capacity_factor)
    if min_capacity is not None and capacity < min_capacity:
        capacity = min_capacity
    return capacity


class MoEAuxLossAutoScaler(torch.autograd.Function):
    """An AutoScaler that triggers the backward pass and scales the grad for auxiliary loss."""

    main_loss_backward_scale: Optional[torch.Tensor] = None

    @staticmethod
    def forward(ctx, output: torch.Tensor, aux_loss: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(aux_loss)
        return output

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        (aux_loss,) = ctx.saved_tensors
        scale = MoEAuxLossAutoScaler.main_loss_backward_scale
        if scale is None:
            scale = torch.tensor(1.0, device=aux_loss.device)
        return grad_output, torch.ones_like(aux_loss) * scale


def topk_routing_with_score_function(
    logits: torch.Tensor,
    topk: int,
    config: TransformerConfig,
    num_groups: Optional[int] = None,
    group_topk: Optional[int] = None,
    scaling_factor: Optional[float] = None,
    score_function: str = "softmax",
    expert_bias: Optional[torch.Tensor] = None,
):
    num_tokens, num_experts = logits.shape
    if all((config.moe_router_fusion, HAVE_TE, torch.is_grad_enabled())):
        return fused_topk_with_score_function(
            logits=logits, topk=topk, use_pre_softmax=False, num_groups=num_groups, group_topk=group_topk,
            scaling_factor=scaling_factor, score_function=score_function, expert_bias=expert_bias,
        )
    if score_function == "softmax":
        scores = torch.softmax(logits, dim=-1, dtype=torch.float32).type_as(logits)
    else:
        scores = torch.sigmoid(logits.float()).type_as(logits)
    if expert_bias is not None:
        _, top_indices = torch.topk(scores + expert_bias, k=topk, dim=1)
        probs = torch.gather(scores, dim=1, index=top_indices)
    else:
        probs, top_indices = torch.topk(scores, k=topk, dim=1)
    if scaling_factor:
        probs = probs * scaling_factor

    # token dropping: limit each expert to its capacity
    capacity_factor = config.moe_expert_capacity_factor if torch.is_grad_enabled() else None
    routing_probs = torch.zeros_like(logits).scatter(1, top_indices, probs)
    routing_map = torch.zeros_like(logits).int().scatter(1, top_indices, 1).bool()
    if capacity_factor is not None:
        expert_capacity = get_capacity(num_tokens * topk, num_experts, capacity_factor)
        _, capacity_indices = torch.topk(routing_probs, k=expert_capacity, dim=0, sorted=False)
        capacity_mask = torch.zeros_like(logits).scatter(0, capacity_indices, 1).bool()
        routing_map = routing_map & capacity_mask
        routing_probs = routing_probs * routing_map
    return routing_probs, routing_map


def apply_load_balancing_loss(output: torch.Tensor, aux_loss: torch.Tensor) -> torch.Tensor:
    # attach the aux loss so that its gradient flows in backward
    if torch.is_grad_enabled():
        output = MoEAuxLossAutoScaler.apply(output, aux_loss)
    return output
