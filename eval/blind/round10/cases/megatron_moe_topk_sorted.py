# Adapted from NVIDIA/Megatron-LM megatron/core/transformer/moe/moe_utils.py
# (topk_routing_with_score_function) and router.py (aux loss attachment)
import torch


class MoEAuxLossAutoScaler(torch.autograd.Function):
    main_loss_backward_scale = torch.tensor(1.0)

    @staticmethod
    def forward(ctx, output, aux_loss):
        ctx.save_for_backward(aux_loss)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        (aux_loss,) = ctx.saved_tensors
        return grad_output, torch.ones_like(aux_loss) * MoEAuxLossAutoScaler.main_loss_backward_scale


def topk_routing_with_score_function(logits, topk, use_pre_softmax=False, score_function="softmax"):
    def compute_topk(scores, k):
        return torch.topk(scores, k=k, dim=1, sorted=torch.is_grad_enabled())

    if score_function == "softmax":
        if use_pre_softmax:
            scores = torch.softmax(logits, dim=-1, dtype=torch.float32).type_as(logits)
            probs, top_indices = compute_topk(scores, topk)
        else:
            scores, top_indices = compute_topk(logits, topk)
            probs = torch.softmax(scores, dim=-1, dtype=torch.float32).type_as(logits)
    else:
        scores = torch.sigmoid(logits.float()).type_as(logits)
        probs, top_indices = compute_topk(scores, topk)
        probs = probs / (probs.sum(dim=-1, keepdim=True) + 1e-20)
    routing_map = torch.zeros_like(logits).int().scatter(1, top_indices, 1).bool()
    routing_probs = torch.zeros_like(logits).scatter(1, top_indices, probs)
    return routing_probs, routing_map


def apply_load_balancing_loss(probs, routing_map, coeff):
    tokens_per_expert = routing_map.sum(dim=0)
    aux_loss = (probs.mean(0) * tokens_per_expert.float()).sum() * coeff
    if torch.is_grad_enabled() and coeff > 0:
        probs = MoEAuxLossAutoScaler.apply(probs, aux_loss)
    return probs
