# adapted from sgl-project/sglang python/sglang/srt/layers/moe/topk.py
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, auto
from typing import Callable, NamedTuple, Optional

import torch
from torch import is_grad_enabled

from sglang.srt.distributed import get_tp_group
from sglang.srt.distributed.device_communicators.pynccl_allocator import use_symmetric_memory
from sglang.srt.layers.dp_attention import is_allocation_symmetric
from sglang.srt.layers.moe import get_moe_runner_backend
from sglang.srt.layers.utils import MultiPlatformOp


@dataclass
class TopKConfig:
    top_k: int
    use_grouped_topk: bool = False
    topk_group: Optional[int] = None
    num_expert_group: Optional[int] = None
    renormalize: bool = True
    num_fused_shared_experts: int = 0
    custom_routing_function: Optional[Callable] = None
    correction_bias: Optional[torch.Tensor] = None
    torch_native: bool = False
    routed_scaling_factor: Optional[float] = None


class TopKOutputFormat(IntEnum):
    STANDARD = auto()
    TRITON_KERNEL = auto()
    BYPASSED = auto()


class StandardTopKOutput(NamedTuple):
    topk_weights: torch.Tensor
    topk_ids: torch.Tensor
    router_logits: torch.Tensor


class BypassedTopKOutput(NamedTuple):
    hidden_states: torch.Tensor
    router_logits: torch.Tensor
    topk_config: TopKConfig


def biased_grouped_topk_impl(
    hidden_states: torch.Tensor,
    gating_output: torch.Tensor,
    correction_bias: torch.Tensor,
    topk: int,
    renormalize: bool,
    num_expert_group: int,
    topk_group: int,
):
    scores = gating_output.sigmoid()
    num_token = scores.shape[0]
    num_experts = scores.shape[1]
    scores_for_choice = scores.view(num_token, -1) + correction_bias.unsqueeze(0)
    group_scores = (
        scores_for_choice.view(num_token, num_expert_group, -1).topk(2, dim=-1)[0].sum(dim=-1)
    )
    group_idx = torch.topk(group_scores, k=topk_group, dim=-1, sorted=False)[1]
    group_mask = torch.zeros_like(group_scores)
    group_mask.scatter_(1, group_idx, 1)
    score_mask = (
        group_mask.unsqueeze(-1)
        .expand(num_token, num_expert_group, num_experts // num_expert_group)
        .reshape(num_token, -1)
    )
    tmp_scores = scores_for_choice.masked_fill(~score_mask.bool(), float("-inf"))
    _, topk_ids = torch.topk(tmp_scores, k=topk, dim=-1, sorted=is_grad_enabled())
    topk_weights = scores.gather(1, topk_ids)
    if renormalize:
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    return topk_weights.to(torch.float32), topk_ids.to(torch.int32)


def select_experts(hidden_states, router_logits, topk_config: TopKConfig) -> StandardTopKOutput:
    topk_weights, topk_ids = biased_grouped_topk_impl(
        hidden_states,
        router_logits,
        topk_config.correction_bias,
        topk_config.top_k,
        topk_config.renormalize,
        topk_config.num_expert_group,
        topk_config.topk_group,
    )
    return StandardTopKOutput(topk_weights, topk_ids, router_logits)


class TopK(MultiPlatformOp):
    def __init__(self, top_k: int, *, layer_id: Optional[int] = None, **kwargs):
        super().__init__()
        self.layer_id = layer_id
        self.topk_config = TopKConfig(top_k=top_k, **kwargs)

    def forward_cuda(self, hidden_states: torch.Tensor, router_logits: torch.Tensor):
        if get_moe_runner_backend().is_triton_kernels():
            output_format = TopKOutputFormat.TRITON_KERNEL
        elif not is_grad_enabled() and get_moe_runner_backend().is_flashinfer_trtllm():
            # the trtllm fused MoE routes internally; only usable without autograd
            output_format = TopKOutputFormat.BYPASSED
        else:
            output_format = TopKOutputFormat.STANDARD

        if output_format == TopKOutputFormat.BYPASSED:
            return BypassedTopKOutput(hidden_states, router_logits, self.topk_config)
        self.topk_config.torch_native = False
        with use_symmetric_memory(get_tp_group(), disabled=not is_allocation_symmetric()):
            return select_experts(hidden_states, router_logits, self.topk_config)
