# adapted from sgl-project/sglang python/sglang/srt/layers/moe/topk.py
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional

import torch
import torch.nn.functional as F

from sglang.srt.eplb.expert_location_dispatch import (
    ExpertLocationDispatchInfo,
    topk_ids_logical_to_physical,
)
from sglang.srt.layers.utils import MultiPlatformOp
from sglang.srt.utils import is_cuda, is_hip

logger = logging.getLogger(__name__)
_is_cuda = is_cuda()
_is_hip = is_hip()

if _is_cuda or _is_hip:
    from sgl_kernel import topk_softmax


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
    sorted_topk: bool = True
    routed_scaling_factor: Optional[float] = None
    scoring_func: str = "softmax"


class StandardTopKOutput(NamedTuple):
    """Standard top-k output format."""

    topk_weights: torch.Tensor
    topk_ids: torch.Tensor
    router_logits: torch.Tensor


def fused_topk_torch_native(
    hidden_states: torch.Tensor,
    gating_output: torch.Tensor,
    topk_config: TopKConfig,
):
    assert hidden_states.shape[0] == gating_output.shape[0], "Number of tokens mismatch"
    if topk_config.scoring_func == "sigmoid":
        scores = gating_output.float().sigmoid()
    else:
        scores = F.softmax(gating_output.float(), dim=-1)
    topk_weights, topk_ids = torch.topk(scores, k=topk_config.top_k, dim=-1, sorted=topk_config.sorted_topk)
    if topk_config.renormalize:
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    return topk_weights, topk_ids


def fused_topk_cuda(hidden_states, gating_output, topk_config: TopKConfig):
    M, _ = hidden_states.shape
    topk_weights = torch.empty(M, topk_config.top_k, dtype=torch.float32, device=hidden_states.device)
    topk_ids = torch.empty(M, topk_config.top_k, dtype=torch.int32, device=hidden_states.device)
    topk_softmax(topk_weights, topk_ids, gating_output.float(), topk_config.renormalize)
    return topk_weights, topk_ids


def select_experts(
    hidden_states: torch.Tensor,
    router_logits: torch.Tensor,
    topk_config: TopKConfig,
    *,
    layer_id: Optional[int] = None,
    num_token_non_padded: Optional[torch.Tensor] = None,
    expert_location_dispatch_info: Optional[ExpertLocationDispatchInfo] = None,
    use_fused_kernel: bool = False,
) -> StandardTopKOutput:
    if topk_config.custom_routing_function is not None:
        topk_weights, topk_ids = topk_config.custom_routing_function(
            hidden_states=hidden_states,
            gating_output=router_logits,
            topk=topk_config.top_k,
            renormalize=topk_config.renormalize,
        )
    elif use_fused_kernel:
        topk_weights, topk_ids = fused_topk_cuda(hidden_states, router_logits, topk_config)
    else:
        topk_weights, topk_ids = fused_topk_torch_native(hidden_states, router_logits, topk_config)

    if topk_config.routed_scaling_factor is not None and not torch.compiler.is_compiling():
        topk_weights = topk_weights * topk_config.routed_scaling_factor

    if expert_location_dispatch_info is not None:
        topk_ids = topk_ids_logical_to_physical(topk_ids, expert_location_dispatch_info)
    return StandardTopKOutput(topk_weights, topk_ids, router_logits)


class TopK(MultiPlatformOp):
    def __init__(
        self,
        top_k: int,
        *,
        layer_id: Optional[int] = None,
        use_grouped_topk: bool = False,
        topk_group: Optional[int] = None,
        num_expert_group: Optional[int] = None,
        renormalize: bool = True,
        num_fused_shared_experts: int = 0,
        custom_routing_function: Optional[Callable] = None,
        scoring_func: str = "softmax",
        correction_bias: Optional[torch.Tensor] = None,
        routed_scaling_factor: Optional[float] = None,
    ):
        super().__init__()
        if use_grouped_topk:
            assert num_expert_group is not None and topk_group is not None
        self.layer_id = layer_id
        self.topk_config = TopKConfig(
            top_k=top_k,
            use_grouped_topk=use_grouped_topk,
            renormalize=renormalize,
            topk_group=topk_group,
            num_expert_group=num_expert_group,
            num_fused_shared_experts=num_fused_shared_experts,
            custom_routing_function=custom_routing_function,
            correction_bias=correction_bias,
            routed_scaling_factor=routed_scaling_factor,
            scoring_func=scoring_func,
        )

    def forward_native(
        self,
        hidden_states: torch.Tensor,
        router_logits: torch.Tensor,
        *,
        num_token_non_padded: Optional[torch.Tensor] = None,
        expert_location_dispatch_info: Optional[ExpertLocationDispatchInfo] = None,
    ) -> StandardTopKOutput:
        self.topk_config.torch_native = True
        # the RL trainer replays this path with grad; keep its ordering contract
        self.topk_config.sorted_topk = torch.is_grad_enabled()
        return select_experts(
            hidden_states=hidden_states,
            router_logits=router_logits,
            topk_config=self.topk_config,
            layer_id=self.layer_id,
            num_token_non_padded=num_token_non_padded,
            expert_location_dispatch_info=expert_location_dispatch_info,
        )

    def forward_cuda(
        self,
        hidden_states: torch.Tensor,
        router_logits: torch.Tensor,
        *,
        num_token_non_padded: Optional[torch.Tensor] = None,
        expert_location_dispatch_info: Optional[ExpertLocationDispatchInfo] = None,
    ) -> StandardTopKOutput:
        self.topk_config.torch_native = False
        fused = (
            torch.is_inference_mode_enabled()
            and self.topk_config.scoring_func == "softmax"
            and self.topk_config.custom_routing_function is None
        )
        return select_experts(
            hidden_states=hidden_states,
            router_logits=router_logits,
            topk_config=self.topk_config,
            layer_id=self.layer_id,
            num_token_non_padded=num_token_non_padded,
            expert_location_dispatch_info=expert_location_dispatch_info,
            use_fused_kernel=fused,
        )
