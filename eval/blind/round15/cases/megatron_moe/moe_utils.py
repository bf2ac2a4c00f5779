# adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/moe_utils.py
import math
from typing import NamedTuple, Optional

import torch

from megatron.core import parallel_state
from megatron.core.tensor_parallel.mappings import reduce_from_tensor_model_parallel_region
from megatron.core.transformer.transformer_config import TransformerConfig


class TopKRoutingOptions(NamedTuple):
    capacity_factor: Optional[float]
    pad_to_capacity: bool
    drop_policy: str
    use_pre_softmax: bool
    score_function: str
    sorted_topk: bool


def switch_load_balancing_loss_func(
    probs: torch.Tensor,
    tokens_per_expert: torch.Tensor,
    total_num_tokens: int,
    topk: int,
    num_experts: int,
    moe_aux_loss_coeff: float,
) -> torch.Tensor:
    """Calculate the auxiliary loss for load balancing."""
    aggregated_probs_per_expert = probs.sum(dim=0)
    aux_loss = torch.sum(aggregated_probs_per_expert * tokens_per_expert) * (
        num_experts * moe_aux_loss_coeff / (topk * total_num_tokens * total_num_tokens)
    )
    return aux_loss


def z_loss_func(logits: torch.Tensor, z_loss_coeff: float) -> torch.Tensor:
    """Encourages the router's logits to remain small to enhance stability."""
    z_loss = torch.mean(torch.square(torch.logsumexp(logits, dim=-1))) * z_loss_coeff
    return z_loss


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
        if MoEAuxLossAutoScaler.main_loss_backward_scale is None:
            MoEAuxLossAutoScaler.main_loss_backward_scale = torch.tensor(1.0, device=aux_loss.device)
        aux_loss_backward_scale = MoEAuxLossAutoScaler.main_loss_backward_scale
        scaled_aux_loss_grad = torch.ones_like(aux_loss) * aux_loss_backward_scale
        return grad_output, scaled_aux_loss_grad


def topk_softmax_with_capacity(
    logits: torch.Tensor,
    topk: int,
    opts: TopKRoutingOptions,
    expert_bias: Optional[torch.Tensor] = None,
):
    """Apply capacity and padding to the top-k selection."""
    assert logits.dim() == 2, f"Expected 2D logits [num_tokens, num_experts], got {logits.dim()}."
    num_tokens, num_experts = logits.shape

    if opts.score_function == "softmax":
        if opts.use_pre_softmax:
            scores = torch.softmax(logits, dim=-1, dtype=torch.float32).type_as(logits)
            probs, top_indices = torch.topk(scores, k=topk, dim=1)
        else:
            scores, top_indices = torch.topk(logits, k=topk, dim=1)
            probs = torch.softmax(scores, dim=-1, dtype=torch.float32).type_as(logits)
    elif opts.score_function == "sigmoid":
        scores = torch.sigmoid(logits.float()).type_as(logits)
        if expert_bias is not None:
            scores_for_routing = scores + expert_bias
            _, top_indices = torch.topk(scores_for_routing, k=topk, dim=1, sorted=opts.sorted_topk)
            scores = torch.gather(scores, dim=1, index=top_indices).type_as(logits)
        else:
            scores, top_indices = torch.topk(scores, k=topk, dim=1)
        probs = scores / (scores.sum(dim=-1, keepdim=True) + 1e-20) if topk > 1 else scores
    else:
        raise ValueError(f"Invalid score_function: {opts.score_function}")

    topk_masked_gates = torch.zeros_like(logits).scatter(1, top_indices, probs)
    topk_map = torch.zeros_like(logits).int().scatter(1, top_indices, 1).bool()
    tokens_per_expert = topk_map.sum(dim=0)

    if opts.capacity_factor is None:
        return topk_masked_gates, topk_map, tokens_per_expert

    expert_capacity = get_capacity(num_tokens=num_tokens * topk, num_experts=num_experts, capacity_factor=opts.capacity_factor)
    if opts.drop_policy == "probs":
        _, capacity_indices = torch.topk(topk_masked_gates, k=expert_capacity, dim=0, sorted=False)
        capacity_mask = torch.zeros_like(logits).scatter(0, capacity_indices, 1).bool()
    elif opts.drop_policy == "position":
        _, capacity_indices = torch.topk(topk_map.int(), k=expert_capacity, dim=0, sorted=False)
        capacity_mask = torch.zeros_like(logits).scatter(0, capacity_indices, 1).bool()
    else:
        raise ValueError(f"Invalid drop_policy: {opts.drop_policy}")

    if opts.pad_to_capacity:
        final_map = capacity_mask
        final_probs = topk_masked_gates * final_map
    else:
        final_map = torch.logical_and(topk_map, capacity_mask)
        final_probs = topk_masked_gates * final_map
    return final_probs, final_map, tokens_per_expert


def shared_expert_overlap_active(config: TransformerConfig) -> bool:
    return config.moe_shared_expert_overlap and torch.is_grad_enabled()


def permute(tokens, routing_map, num_out_tokens: Optional[int] = None):
    num_tokens, hidden = tokens.shape
    num_experts = routing_map.shape[1]
    routing_map = routing_map.bool().T.contiguous()
    token_indices = torch.arange(num_tokens, device=routing_map.device).unsqueeze(0).expand(num_experts, -1)
    sorted_indices = token_indices.masked_select(routing_map)
    permuted_input = tokens.index_select(0, sorted_indices)
    return permuted_input, sorted_indices


def unpermute(permuted_tokens, sorted_indices, restore_shape, probs=None, routing_map=None):
    _, hidden = restore_shape
    if probs is not None:
        permuted_probs = probs.T.contiguous().masked_select(routing_map.T.contiguous())
        permuted_tokens = permuted_tokens * permuted_probs.unsqueeze(-1)
    output_tokens = torch.zeros(restore_shape, device=permuted_tokens.device, dtype=permuted_tokens.dtype)
    output_tokens.scatter_add_(0, sorted_indices.unsqueeze(1).expand(-1, hidden), permuted_tokens)
    return output_tokens
