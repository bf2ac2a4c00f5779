import torch
import torch.nn.functional as F

from .config import MoeRunnerConfig


def select_experts(router_logits: torch.Tensor, top_k: int, renormalize: bool, cfg: MoeRunnerConfig):
    router_dtype = torch.float32 if cfg.autograd_possible else router_logits.dtype
    scores = torch.softmax(router_logits.to(router_dtype), dim=-1)
    topk_weights, topk_ids = torch.topk(scores, top_k, dim=-1)
    if renormalize:
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    return topk_weights, topk_ids


def fused_experts(hidden_states, w13, w2, topk_weights, topk_ids, cfg: MoeRunnerConfig):
    from sglang.srt.layers.moe.fused_moe_triton.fused_moe import fused_experts_impl
    # writing the result into hidden_states is only legal when autograd cannot need it
    inplace = cfg.inplace and not cfg.autograd_possible
    out = fused_experts_impl(hidden_states, w13, w2, topk_weights, topk_ids, inplace=inplace,
                             activation=cfg.activation, no_combine=cfg.no_combine)
    if cfg.routed_scaling_factor is not None:
        out = out * cfg.routed_scaling_factor
    return out
