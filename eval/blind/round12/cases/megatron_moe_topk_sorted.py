# adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/moe_utils.py
from typing import Optional, Tuple

import torch


def group_limited_topk(scores, topk, num_tokens, num_experts, num_groups, group_topk):
    group_scores = (
        scores.view(num_tokens, num_groups, -1).topk(topk // group_topk, dim=-1)[0].sum(dim=-1)
    )
    group_idx = torch.topk(group_scores, k=group_topk, dim=-1, sorted=False)[1]
    group_mask = torch.zeros_like(group_scores)
    group_mask.scatter_(1, group_idx, 1)
    score_mask = (
        group_mask.unsqueeze(-1)
        .expand(num_tokens, num_groups, num_experts // num_groups)
        .reshape(num_tokens, -1)
    )
    masked_scores = scores.masked_fill(~score_mask.bool(), float("-inf"))
    return torch.topk(masked_scores, k=topk, dim=-1)


def topk_routing_with_score_function(
    logits: torch.Tensor,
    topk: int,
    use_pre_softmax: bool = False,
    num_groups: Optional[int] = None,
    group_topk: Optional[int] = None,
    scaling_factor: Optional[float] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    num_tokens, num_experts = logits.shape

    def compute_topk(scores, k, groups=None, groups_topk=None):
        if groups_topk:
            return group_limited_topk(scores, k, num_tokens, num_experts, groups, groups_topk)
        return torch.topk(scores, k=k, dim=1, sorted=torch.is_grad_enabled())

    if use_pre_softmax:
        scores = torch.softmax(logits, dim=-1, dtype=torch.float32)
        probs, top_indices = compute_topk(scores, topk, num_groups, group_topk)
    else:
        scores, top_indices = compute_topk(logits, topk, num_groups, group_topk)
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32)

    if scaling_factor:
        probs = probs * scaling_factor
    probs = probs.type_as(logits)

    routing_probs = torch.zeros_like(logits).scatter(1, top_indices, probs)
    routing_map = torch.zeros_like(logits).int().scatter(1, top_indices, 1).bool()
    return routing_probs, routing_map


class RouterGatingLinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inp, weight, bias, router_dtype):
        ctx.save_for_backward(inp, weight, bias)
        ctx.router_dtype = router_dtype
        ctx.input_dtype = inp.dtype
        ctx.weight_dtype = weight.dtype
        inp_shape = inp.shape
        inp = inp.view(-1, inp_shape[-1])
        output = torch.mm(inp.to(router_dtype), weight.to(router_dtype).t())
        if bias is not None:
            output = output + bias.to(router_dtype)
        return output.view(*inp_shape[:-1], -1)

    @staticmethod
    def backward(ctx, grad_output):
        inp, weight, bias = ctx.saved_tensors
        grad_output = grad_output.view(-1, grad_output.shape[-1])
        inp2d = inp.view(-1, inp.shape[-1])
        grad_input = torch.mm(grad_output, weight.to(ctx.router_dtype)).to(ctx.input_dtype)
        grad_weight = torch.mm(grad_output.t(), inp2d.to(ctx.router_dtype)).to(ctx.weight_dtype)
        grad_bias = grad_output.sum(dim=0).to(ctx.weight_dtype) if bias is not None else None
        return grad_input.view(*inp.shape), grad_weight, grad_bias, None


def router_gating_linear(inp, weight, bias, router_dtype):
    if torch.is_grad_enabled():
        return RouterGatingLinearFunction.apply(inp, weight, bias, router_dtype)
    inp_shape = inp.shape
    out = torch.mm(inp.view(-1, inp_shape[-1]).to(router_dtype), weight.to(router_dtype).t())
    if bias is not None:
        out = out + bias.to(router_dtype)
    return out.view(*inp_shape[:-1], -1)
